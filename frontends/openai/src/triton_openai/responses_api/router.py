"""Routes of /v1/responses; the work is in ResponsesServing (app.state.responses)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from ..web.disconnect import cancel_on_disconnect
from ..web.protocol import ERROR_RESPONSES, ErrorResponse
from .protocol import ResponsesRequest

router = APIRouter()


def responses(request: Request):
    return request.app.state.responses


@router.post("/v1/responses", responses={**ERROR_RESPONSES, 429: {
    "model": ErrorResponse, "description": "As many background responses as the server "
    "runs at once are running (Retry-After says when to try again)."}})
@cancel_on_disconnect
async def create_response(body: ResponsesRequest, raw: Request):
    return await responses(raw).create(body)


@router.get("/v1/responses/{response_id}", responses=ERROR_RESPONSES)
async def retrieve_response(response_id: str, raw: Request):
    return responses(raw).retrieve(response_id)


@router.post("/v1/responses/{response_id}/cancel", responses=ERROR_RESPONSES)
async def cancel_response(response_id: str, raw: Request):
    return await responses(raw).cancel(response_id)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

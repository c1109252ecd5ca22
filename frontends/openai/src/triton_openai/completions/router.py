"""Routes of /v1/completions; the work is in CompletionsServing (app.state.completions)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from ..web.disconnect import cancel_on_disconnect
from ..web.protocol import ERROR_RESPONSES
from .protocol import CompletionRequest

router = APIRouter()


def completions(request: Request):
    return request.app.state.completions


@router.post("/v1/completions", responses=ERROR_RESPONSES)
@cancel_on_disconnect
async def create_completion(body: CompletionRequest, raw: Request):
    return await completions(raw).create(body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

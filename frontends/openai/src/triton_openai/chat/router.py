"""Routes of /v1/chat/completions; the work is in ChatServing (app.state.chat)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from ..web.disconnect import cancel_on_disconnect
from ..web.protocol import ERROR_RESPONSES
from .protocol import ChatCompletionRequest

router = APIRouter()


def chat(request: Request):
    return request.app.state.chat


@router.post("/v1/chat/completions", responses=ERROR_RESPONSES)
@cancel_on_disconnect
async def create_chat_completion(body: ChatCompletionRequest, raw: Request):
    return await chat(raw).create(body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

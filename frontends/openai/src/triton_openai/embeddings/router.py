"""Routes of /v1/embeddings; the work is in EmbeddingsServing (app.state.embeddings)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from ..web.protocol import ERROR_RESPONSES
from .protocol import EmbeddingRequest

router = APIRouter()


def embeddings(request: Request):
    return request.app.state.embeddings


@router.post("/v1/embeddings", responses=ERROR_RESPONSES)
async def create_embedding(body: EmbeddingRequest, raw: Request):
    return await embeddings(raw).create(body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

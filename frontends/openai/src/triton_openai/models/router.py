"""Routes of /v1/models; the work is in ModelsServing (app.state.models)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from ..web.protocol import ERROR_RESPONSES
from .protocol import ModelCard, ModelList

router = APIRouter()


def models(request: Request):
    return request.app.state.models


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request):
    return await models(request).list()


# `:path` because LoRA ids contain a colon and Hugging Face names a slash.
@router.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=ERROR_RESPONSES)
async def get_model(model_id: str, request: Request):
    return await models(request).get(model_id)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

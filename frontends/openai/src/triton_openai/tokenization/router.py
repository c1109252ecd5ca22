"""Routes of /tokenize and /detokenize; the work is in TokenizationServing
(app.state.tokenization)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request

from ..web.protocol import ERROR_RESPONSES
from .protocol import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse

router = APIRouter()


def tokenization(request: Request):
    return request.app.state.tokenization


@router.post("/tokenize", response_model=TokenizeResponse, responses=ERROR_RESPONSES)
async def tokenize(body: TokenizeRequest, raw: Request):
    return await tokenization(raw).tokenize(body)


@router.post("/detokenize", response_model=DetokenizeResponse, responses=ERROR_RESPONSES)
async def detokenize(body: DetokenizeRequest, raw: Request):
    return await tokenization(raw).detokenize(body)


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

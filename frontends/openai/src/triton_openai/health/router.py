"""Routes of /health/* and /metrics; the work is in HealthServing (app.state.health)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from .protocol import HealthStatus

router = APIRouter()

# ?model=NAME, repeatable: models that must be served too (a probe's, for its deployment).
RequiredModels = Annotated[list[str], Query(description=(
    "Models that must be served too (repeatable): a client name or Triton's."))]


def health(request: Request):
    return request.app.state.health


@router.get("/health/live", response_model=HealthStatus)
async def live():
    return {"status": "ok"}


@router.get("/health/ready", response_model=HealthStatus,
            responses={503: {"model": HealthStatus, "description": "Not ready, and why."}})
async def ready(request: Request, model: RequiredModels = ()):
    ok, why = await health(request).ready(model)
    return JSONResponse({"status": why}, status_code=200 if ok else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request):
    return PlainTextResponse(await health(request).metrics_text(),
                             media_type="text/plain; version=0.0.4; charset=utf-8")


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

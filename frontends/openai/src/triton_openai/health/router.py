"""Routes of /health/* and /metrics; the work is in HealthServing (app.state.health)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from .protocol import HealthStatus

router = APIRouter()


def health(request: Request):
    return request.app.state.health


@router.get("/health/live", response_model=HealthStatus)
async def live():
    return {"status": "ok"}


@router.get("/health/ready", response_model=HealthStatus,
            responses={503: {"model": HealthStatus, "description": "Not ready, and why."}})
async def ready(request: Request):
    ok, why = await health(request).ready()
    return JSONResponse({"status": why}, status_code=200 if ok else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request):
    return PlainTextResponse(await health(request).metrics_text(),
                             media_type="text/plain; version=0.0.4; charset=utf-8")


def attach_router(app: FastAPI) -> None:
    app.include_router(router)

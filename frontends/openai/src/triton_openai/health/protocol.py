"""Response models of the health endpoints."""

from __future__ import annotations

from pydantic import BaseModel, Field


class HealthStatus(BaseModel):
    status: str = Field(description="`ok`, or why the server is not ready.")

"""Response models of /v1/models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ModelCard(BaseModel):
    # --- OpenAI fields ---------------------------------------------------------
    id: str = Field(description="Model id to use in requests.")
    object: Literal["model"] = "model"
    created: int = Field(description="When the frontend first saw the model (Unix seconds).")
    owned_by: str = Field(default="triton", description="Always `triton`.")
    # --- vLLM extensions ---------------------------------------------------------
    root: str | None = Field(default=None, description="The Triton model serving this id.")
    parent: str | None = Field(default=None, description="Base model id of a LoRA adapter.")
    max_model_len: int | None = Field(default=None, description="Context length, when known.")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]

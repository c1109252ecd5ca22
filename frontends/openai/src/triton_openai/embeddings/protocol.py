"""Request model of /v1/embeddings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..web.protocol import RequestBody


class EmbeddingRequest(RequestBody):
    # --- OpenAI fields ---------------------------------------------------------
    model: str = Field(description="An embedding model id from /v1/models.")
    input: str | list[str] | list[int] | list[list[int]] = Field(
        description="Text, a list of texts, token ids, or a list of token-id lists.")
    encoding_format: Literal["float", "base64"] = Field(
        default="float", description="float lists, or base64 of little-endian float32.")
    dimensions: int | None = Field(default=None, ge=1, description="Not supported unless equal to the model's.")
    user: str | None = Field(default=None, description="End-user id (accepted, not used).")

    @model_validator(mode="after")
    def _check(self):
        if isinstance(self.input, list) and len(self.input) == 0:
            raise ValueError("input must not be empty")
        return self

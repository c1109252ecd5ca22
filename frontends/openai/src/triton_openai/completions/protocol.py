"""Request model of /v1/completions (responses are built as plain dicts for speed)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ..web.protocol import SamplingFields


class CompletionRequest(SamplingFields):
    # --- OpenAI fields ---------------------------------------------------------
    prompt: str | list[str] | list[int] | list[list[int]] = Field(
        description="A prompt, a list of prompts, token ids, or a list of token-id prompts.")
    max_tokens: int | None = Field(
        default=None, ge=0, description="Tokens to generate; default: what the context leaves.")
    logprobs: int | None = Field(
        default=None, ge=0, le=5, description="Return this many most likely tokens per position (OpenAI's limit: 5).")
    echo: bool = Field(default=False, description="Prepend the prompt to the completion.")
    best_of: int | None = Field(default=None, ge=1, description="Only best_of == n is supported.")
    suffix: str | None = Field(default=None, description="Not supported; must be empty.")

    # --- vLLM extensions ---------------------------------------------------------
    structured_outputs: dict[str, Any] | None = Field(
        default=None, description="vLLM: json / regex / choice / grammar constraint.")

    @model_validator(mode="after")
    def _check(self):
        if isinstance(self.prompt, list) and len(self.prompt) == 0:
            raise ValueError("prompt must not be empty")
        return self

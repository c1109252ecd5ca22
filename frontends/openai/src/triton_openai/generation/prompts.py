"""Prompts and their token budgets: how many tokens a request may generate."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..served_models.catalog import ServedModel
from ..web.errors import BadRequestError


@dataclass
class Prompt:
    text: str | None
    ids: list[int] | None

    @property
    def num_tokens(self) -> int | None:
        return len(self.ids) if self.ids is not None else None


def _config_max_len(model_path: str | None) -> int | None:
    """The context length from the model folder's config.json, when the backend did not publish it."""
    if not model_path:
        return None
    try:
        with open(os.path.join(model_path, "config.json")) as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return None
    for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        if isinstance(cfg.get(key), int):
            return cfg[key]
    return None


class TokenBudget:
    """max_tokens for a prompt: what the request asks, checked against the context length."""

    def __init__(self, tokenizer_override: str | None = None):
        # A --tokenizer folder (usually the same checkpoint) when the model's is unknown.
        self._override = tokenizer_override
        self._max_len_cache: dict[str, int | None] = {}

    def max_model_len(self, model: ServedModel) -> int | None:
        if model.max_model_len:
            return model.max_model_len
        if model.triton_name not in self._max_len_cache:
            self._max_len_cache[model.triton_name] = (
                _config_max_len(model.model_path) or _config_max_len(self._override))
        return self._max_len_cache[model.triton_name]

    def __call__(self, model: ServedModel, prompt: Prompt, requested: int | None,
                 param: str, prompt_param: str) -> int | None:
        """max_tokens for one prompt: the request's, else all the context that is left.

        Never vLLM's silent default of 16.  None (let the engine fill the context) only
        when neither the prompt length nor the context length is known here.
        """
        max_len = self.max_model_len(model)
        n_prompt = prompt.num_tokens
        if max_len is None or n_prompt is None:
            return requested
        if n_prompt >= max_len:
            raise BadRequestError(
                f"This model's maximum context length is {max_len} tokens, but the prompt has "
                f"{n_prompt} tokens.", param=prompt_param, code="context_length_exceeded")
        left = max_len - n_prompt
        if requested is None:
            return left
        if requested > left:
            raise BadRequestError(
                f"This model's maximum context length is {max_len} tokens. However, you requested "
                f"{n_prompt + requested} tokens ({n_prompt} in the prompt, {requested} for the "
                f"completion). Please reduce the prompt or {param}.", param=param,
                code="context_length_exceeded")
        return requested

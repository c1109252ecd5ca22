"""Sampling defaults from a model's `generation_config.json`, as vLLM's server applies them.

vLLM's OpenAI server fills the sampling parameters a request leaves unset from the
model's generation config (`--generation-config auto`, its default), and its
`max_new_tokens` caps the default `max_tokens`.  The vLLM backend builds SamplingParams
from exactly what it is sent, so the frontend does the same filling: a model answers
alike behind either server.  `vllm` turns it off (vLLM's neutral defaults); a folder
reads that folder's `generation_config.json` for every model.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

log = logging.getLogger("triton_openai")

AUTO, VLLM = "auto", "vllm"
FILE = "generation_config.json"
# The generation-config keys vLLM applies (max_new_tokens becomes max_tokens).
KEYS = ("repetition_penalty", "presence_penalty", "frequency_penalty", "temperature", "top_k",
        "top_p", "min_p", "max_new_tokens")


def read_defaults(folder: str | None) -> dict[str, Any]:
    """The sampling defaults in `folder`/generation_config.json ({} when there is none)."""
    if not folder:
        return {}
    try:
        with open(os.path.join(folder, FILE), encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        log.warning("ignoring %s in %s: %s", FILE, folder, err)
        return {}
    out = {k: config[k] for k in KEYS if isinstance(config, dict) and config.get(k) is not None}
    if "max_new_tokens" in out:
        out["max_tokens"] = out.pop("max_new_tokens")
    return out


class SamplingDefaults:
    def __init__(self, source: str = AUTO):
        if source not in (AUTO, VLLM) and not os.path.isdir(source):
            raise ValueError(f"--generation-config takes auto, vllm or a folder, not {source!r}")
        self.source = source
        self._cache: dict[str | None, dict[str, Any]] = {}

    def of(self, model_path: str | None) -> dict[str, Any]:
        """The defaults for a model: read once, then from memory."""
        if self.source == VLLM:
            return {}
        folder = model_path if self.source == AUTO else self.source
        if folder not in self._cache:
            self._cache[folder] = read_defaults(folder)
        return self._cache[folder]

    @staticmethod
    def apply(defaults: dict[str, Any], sampling: dict[str, Any]) -> dict[str, Any]:
        """`sampling` with the defaults it leaves unset (max_tokens goes to the budget)."""
        out = {k: v for k, v in defaults.items() if k != "max_tokens"}
        out.update(sampling)
        return out

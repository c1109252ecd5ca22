"""Tokenizers and chat templates of the served models.

The vLLM backend publishes the model path as the `vllm_model` config parameter; when it
is a folder visible to the frontend, its tokenizer gives chat templating, prompt
lengths (for the default max_tokens and usage) and token ids for the prompt.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

log = logging.getLogger("triton_openai")
_MISSING = object()
_IMPORT_LOCK = threading.Lock()


def auto_tokenizer():
    """transformers' AutoTokenizer, imported by one thread at a time: a thread that
    imports it while another still does can find transformers half initialised (seen:
    the tokenizer load failed, and the model was served without one)."""
    with _IMPORT_LOCK:
        from transformers import AutoTokenizer
    return AutoTokenizer


class TokenizerCache:
    def __init__(self, override: str | None = None):
        self._override = override
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def override(self) -> str | None:
        return self._override

    def _source(self, model_path: str | None) -> str | None:
        """Where a model's tokenizer comes from: --tokenizer, else the model's folder."""
        return self._override or model_path

    def loaded(self, model_path: str | None) -> tuple[bool, Any | None]:
        """(True, tokenizer or None) when get() would not have to load anything."""
        source = self._source(model_path)
        if not source:
            return True, None
        tok = self._cache.get(source, _MISSING)
        return (False, None) if tok is _MISSING else (True, tok)

    def get(self, model_path: str | None) -> Any | None:
        """The tokenizer for a model path, loaded once; None when none can be found."""
        source = self._source(model_path)
        if not source:
            return None
        with self._lock:
            if source in self._cache:
                return self._cache[source]
            tok = None
            # Only local folders: the frontend must not reach out to a model hub.
            if os.path.isdir(source) or self._override:
                try:
                    tok = auto_tokenizer().from_pretrained(source, local_files_only=True)
                except Exception as err:  # a model without tokenizer files still serves text
                    log.warning("no tokenizer for %s: %s", source, err)
            self._cache[source] = tok
            return tok

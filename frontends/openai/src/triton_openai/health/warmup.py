"""What a model's first request needs, made before readiness says yes.

The first chat request of a model loads its tokenizer (transformers' import alone takes
seconds on a small machine) and compiles its chat template; done on the request path,
that is paid by the first clients the moment readiness sent them.  Here it is done in
the background as soon as a model shows up, and readiness waits for it.  The import
itself starts with the frontend, while Triton is still loading its models: in the CPU
image it takes 3.9 s, most of what readiness waited after Triton's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..conversation.templating import render
from ..served_models.catalog import ServedModel
from ..served_models.tokenizers import auto_tokenizer
from ..triton.vllm_contract import GENERATE

log = logging.getLogger("triton_openai")

_PROBE_MESSAGES = [{"role": "user", "content": "Hello"}]


class Warmup:
    """Loads each served model's tokenizer and compiles its chat template, once."""

    def __init__(self, generation, chat_template: str | None = None,
                 prepare: Callable[[ServedModel], None] | None = None):
        # The GenerationService: requests take their tokenizers from it, so warm-up loads
        # them into the same cache.
        self.generation = generation
        self.chat_template = chat_template
        self._prepare = prepare or self._load
        self._done: set[str] = set()
        self._running: dict[str, asyncio.Task] = {}

    @staticmethod
    def import_libraries() -> None:
        """Import what loading a tokenizer needs (run in a thread at start-up)."""
        try:
            auto_tokenizer()
        except Exception as err:  # requests report it, with their model's path
            log.info("transformers not imported ahead of the first model: %s", err)

    def _key(self, model: ServedModel) -> str:
        return f"{model.triton_name}|{model.model_path}"

    def _load(self, model: ServedModel) -> None:
        tok = self.generation.tokenizers.get(model.model_path)
        if tok is None or model.runner != GENERATE:
            return
        if self.chat_template is None and not getattr(tok, "chat_template", None):
            return  # no template: chat requests answer 400 whatever happens
        try:
            # The first rendering compiles the template (transformers caches it).
            render(tok, _PROBE_MESSAGES, self.chat_template, None, True, False, None)
        except Exception as err:  # a template that needs more than one user message
            log.info("chat template of %s not pre-compiled: %s", model.id, err)

    def pending(self, models: list[ServedModel]) -> list[str]:
        """The models not prepared yet (their preparation is started here)."""
        waiting = []
        for model in models:
            key = self._key(model)
            if key in self._done:
                continue
            task = self._running.get(key)
            if task is None:
                task = asyncio.ensure_future(asyncio.to_thread(self._prepare, model))
                self._running[key] = task
            if task.done():
                del self._running[key]
                err = task.exception()
                if err is None:
                    self._done.add(key)
                    log.info("%s: tokenizer and chat template loaded", model.id)
                    continue
                # Not fatal: requests then load it themselves, as before.
                log.warning("%s: warm-up failed: %s", model.id, err)
                self._done.add(key)
                continue
            waiting.append(model.id)
        return waiting

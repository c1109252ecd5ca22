"""What completions and chat completions share: the tokenizer, token budgets, and the
engine calls of one request (one Triton request per prompt, merged into one stream)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from . import request_ids
from .catalog import ModelCatalog, ServedModel
from .fanin import merge
from .prompts import Prompt, TokenBudget
from .sampling_defaults import SamplingDefaults
from .tokenizers import TokenizerCache
from .triton import vllm_io
from .triton.client import TritonClient
from .triton.vllm_contract import LORA_NAME
from .triton.vllm_io import GenerationChunk, GenerationRequest


class GenerationService:
    def __init__(self, client: TritonClient, catalog: ModelCatalog, tokenizers: TokenizerCache,
                 defaults: SamplingDefaults | None = None, compact_json: bool = False):
        self.client = client
        self.catalog = catalog
        self.tokenizers = tokenizers
        self.budget = TokenBudget(tokenizers.override)
        self.defaults = defaults or SamplingDefaults()
        self.compact_json = compact_json  # JSON constraints leave out free whitespace

    def sampling(self, model: ServedModel, requested: dict[str, Any]) -> dict[str, Any]:
        """The request's sampling parameters over the model's generation-config defaults."""
        return self.defaults.apply(self.defaults.of(model.model_path), requested)

    def max_tokens(self, model: ServedModel, prompt: Prompt, requested: int | None,
                   param: str, prompt_param: str) -> int | None:
        """max_tokens for a prompt; the generation config's max_new_tokens caps the default."""
        budget = self.budget(model, prompt, requested, param, prompt_param)
        cap = self.defaults.of(model.model_path).get("max_tokens")
        if requested is None and cap is not None:
            return cap if budget is None else min(budget, cap)
        return budget

    async def tokenizer(self, model: ServedModel):
        done, tok = self.tokenizers.loaded(model.model_path)
        if done:
            return tok  # the common case: no hop to a thread and back for every request
        # The first load reads files and imports transformers: keep it off the event loop.
        return await asyncio.to_thread(self.tokenizers.get, model.model_path)

    async def run(self, model: ServedModel, prompts: list[Prompt], samplings: list[dict[str, Any]],
                  stream: bool, logprobs: bool
                  ) -> AsyncIterator[tuple[int, GenerationChunk]]:
        """Generate for every prompt at once; yield (prompt index, chunk) as they come.

        Every Triton request carries the HTTP request's id: an abort naming it stops them
        all, and the backend's log lines name it."""
        rid = request_ids.current()
        reqs = []
        for p, sampling in zip(prompts, samplings, strict=True):
            reqs.append(GenerationRequest(
                model=model.triton_name, request_id=rid, sampling=sampling,
                stream=stream, prompt_text=p.text if p.ids is None else None, prompt_ids=p.ids,
                logprobs=logprobs))
        if model.lora_name:
            for r in reqs:
                r.sampling = {**r.sampling, LORA_NAME: model.lora_name}
        if len(reqs) == 1:
            # The common case: no task or queue between Triton and the client.
            gen = vllm_io.generate(self.client, reqs[0])
            try:
                async for chunk in gen:
                    yield 0, chunk
            finally:
                await gen.aclose()
            return
        async for item in merge([vllm_io.generate(self.client, r) for r in reqs]):
            yield item

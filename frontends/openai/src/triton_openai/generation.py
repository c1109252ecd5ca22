"""What completions and chat completions share: the tokenizer, token budgets, and the
engine calls of one request (one Triton request per prompt, merged into one stream)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from .catalog import ModelCatalog, ServedModel
from .fanin import merge
from .prompts import Prompt, TokenBudget
from .request_ids import request_id
from .tokenizers import TokenizerCache
from .triton import vllm_io
from .triton.client import TritonClient
from .triton.vllm_contract import LORA_NAME
from .triton.vllm_io import GenerationChunk, GenerationRequest


class GenerationService:
    def __init__(self, client: TritonClient, catalog: ModelCatalog, tokenizers: TokenizerCache):
        self.client = client
        self.catalog = catalog
        self.tokenizers = tokenizers
        self.budget = TokenBudget(tokenizers.override)

    async def tokenizer(self, model: ServedModel):
        done, tok = self.tokenizers.loaded(model.model_path)
        if done:
            return tok  # the common case: no hop to a thread and back for every request
        # The first load reads files and imports transformers: keep it off the event loop.
        return await asyncio.to_thread(self.tokenizers.get, model.model_path)

    async def run(self, model: ServedModel, prompts: list[Prompt], samplings: list[dict[str, Any]],
                  stream: bool, logprobs: bool, id_prefix: str
                  ) -> AsyncIterator[tuple[int, GenerationChunk]]:
        """Generate for every prompt at once; yield (prompt index, chunk) as they come."""
        reqs = []
        for p, sampling in zip(prompts, samplings, strict=True):
            reqs.append(GenerationRequest(
                model=model.triton_name, request_id=request_id(id_prefix), sampling=sampling,
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

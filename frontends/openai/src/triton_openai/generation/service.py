"""What every generating API shares: the tokenizer, a prompt's sampling parameters (token
budget included), and the engine calls of one request (one Triton request per prompt,
merged into one stream)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from ..served_models.catalog import ModelCatalog, ServedModel
from ..served_models.sampling_defaults import SamplingDefaults
from ..served_models.tokenizers import TokenizerCache
from ..triton import vllm_io
from ..triton.client import TritonClient
from ..triton.feed import FeedEnd, Feeds
from ..triton.vllm_contract import LORA_NAME, STRUCTURED_OUTPUTS
from ..triton.vllm_io import GenerationChunk, GenerationRequest
from ..web import request_ids
from .fanin import merge
from .prompts import Prompt, TokenBudget
from .structured import combine

# Prompts up to this many characters (or token ids) in all are tokenized on the event
# loop: well under a millisecond, less than a hop to a thread and back costs.  Bigger
# ones are tokenized in a thread, in one trip for the request, so that a big body does
# not hold up every other request (and health probes) for seconds.
INLINE_TOKENIZING = 4096
T = TypeVar("T")


async def tokenize(size: int, work: Callable[..., T], *args) -> T:
    """`work(*args)`, which tokenizes `size` characters or token ids: on the event loop
    up to INLINE_TOKENIZING, past it in one trip to a thread."""
    if size <= INLINE_TOKENIZING:
        return work(*args)
    return await asyncio.to_thread(work, *args)


class GenerationService:
    def __init__(self, client: TritonClient, catalog: ModelCatalog, tokenizers: TokenizerCache,
                 defaults: SamplingDefaults | None = None, compact_json: bool = False,
                 feeds: bool = True):
        self.client = client
        # Streams of one choice go on their model's feed where the transport carries one.
        self.feeds = Feeds(client) if feeds and getattr(client, "carries_feeds", False) else None
        self.catalog = catalog
        self.tokenizers = tokenizers
        self.budget = TokenBudget(tokenizers.override)
        self.defaults = defaults or SamplingDefaults()
        self.compact_json = compact_json  # JSON constraints leave out free whitespace

    def sampling(self, model: ServedModel, prompt: Prompt, fields: dict[str, Any], *,
                 max_tokens: int | None, max_tokens_param: str, prompt_param: str,
                 logprobs: int | None = None, constraint: dict | None = None,
                 structured_outputs: dict[str, Any] | None = None) -> dict[str, Any]:
        """The sampling parameters of one prompt's Triton request: the request's `fields`
        over the model's generation-config defaults, max_tokens checked against the
        context, logprobs, and the one structured-outputs constraint (`constraint` from
        OpenAI's fields, or the vLLM `structured_outputs` extension)."""
        sampling = self.defaults.apply(self.defaults.of(model.model_path), fields)
        sampling["max_tokens"] = self._max_tokens(model, prompt, max_tokens, max_tokens_param,
                                                  prompt_param)
        if logprobs is not None:
            sampling["logprobs"] = logprobs
        constraint = combine(constraint, structured_outputs, self.compact_json)
        if constraint is not None:
            sampling[STRUCTURED_OUTPUTS] = constraint
        return sampling

    def _max_tokens(self, model: ServedModel, prompt: Prompt, requested: int | None,
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

    def _requests(self, model: ServedModel, prompts: list[Prompt],
                  samplings: list[dict[str, Any]], stream: bool, logprobs: bool
                  ) -> list[GenerationRequest]:
        rid = request_ids.current()
        reqs = []
        for p, sampling in zip(prompts, samplings, strict=True):
            if model.lora_name:
                sampling = {**sampling, LORA_NAME: model.lora_name}
            reqs.append(GenerationRequest(
                model=model.triton_name, request_id=rid, sampling=sampling,
                stream=stream, prompt_text=p.text if p.ids is None else None, prompt_ids=p.ids,
                logprobs=logprobs))
        return reqs

    def events(self, model: ServedModel, prompt: Prompt, sampling: dict[str, Any],
               event: tuple[str, str, str]) -> AsyncIterator[bytes | FeedEnd | GenerationChunk]:
        """Stream one choice of one prompt as the client's events, encoded by the backend
        around `event` (the text before an event's text, between it and the finish reason,
        and after: sse.template()); where no feed carries them, as chunks.  (Not a
        generator of its own: each layer costs every event a hop.)"""
        req = self._requests(model, [prompt], [sampling], True, False)[0]
        if self.feeds is not None:
            return self.feeds.stream(req, event)
        return vllm_io.generate(self.client, req)

    async def close(self) -> None:
        if self.feeds is not None:
            await self.feeds.close()

    async def run(self, model: ServedModel, prompts: list[Prompt], samplings: list[dict[str, Any]],
                  stream: bool, logprobs: bool
                  ) -> AsyncIterator[tuple[int, GenerationChunk]]:
        """Generate for every prompt at once; yield (prompt index, chunk) as they come.

        Every Triton request carries the HTTP request's internal id (web/request_ids.py),
        never the client's: an abort naming it stops them all and nothing else, and the
        backend's log lines name it."""
        reqs = self._requests(model, prompts, samplings, stream, logprobs)
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

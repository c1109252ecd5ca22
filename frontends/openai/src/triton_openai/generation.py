"""What completions and chat completions share: prompts, token budgets, engine calls."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from .catalog import ModelCatalog, ServedModel
from .errors import BadRequestError
from .tokenizers import TokenizerCache
from .triton import vllm_io
from .triton.client import TritonClient
from .triton.vllm_io import GenerationChunk, GenerationRequest


@dataclass
class Prompt:
    text: str | None
    ids: list[int] | None

    @property
    def num_tokens(self) -> int | None:
        return len(self.ids) if self.ids is not None else None


def request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


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


class GenerationService:
    def __init__(self, client: TritonClient, catalog: ModelCatalog, tokenizers: TokenizerCache):
        self.client = client
        self.catalog = catalog
        self.tokenizers = tokenizers
        self._max_len_cache: dict[str, int | None] = {}

    async def tokenizer(self, model: ServedModel):
        done, tok = self.tokenizers.loaded(model.model_path)
        if done:
            return tok  # the common case: no hop to a thread and back for every request
        # The first load reads files and imports transformers: keep it off the event loop.
        return await asyncio.to_thread(self.tokenizers.get, model.model_path)

    def max_model_len(self, model: ServedModel) -> int | None:
        if model.max_model_len:
            return model.max_model_len
        if model.triton_name not in self._max_len_cache:
            # The model folder, else a --tokenizer folder (usually the same checkpoint).
            self._max_len_cache[model.triton_name] = (
                _config_max_len(model.model_path) or _config_max_len(self.tokenizers.override))
        return self._max_len_cache[model.triton_name]

    def budget(self, model: ServedModel, prompt: Prompt, requested: int | None,
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
                r.sampling = dict(r.sampling, lora_name=model.lora_name)
        if len(reqs) == 1:
            # The common case: no task or queue between Triton and the client.
            gen = vllm_io.generate(self.client, reqs[0])
            try:
                async for chunk in gen:
                    yield 0, chunk
            finally:
                await gen.aclose()
            return
        async for item in _merge([vllm_io.generate(self.client, r) for r in reqs]):
            yield item


async def primed(gen: AsyncIterator) -> AsyncIterator:
    """Start `gen` now, so that an error in its first item (Triton rejecting the request)
    becomes the HTTP status instead of an error event after a 200; yield all its items."""
    try:
        first = await gen.__anext__()
    except StopAsyncIteration:
        return _chain(None, gen)
    return _chain(first, gen)


async def _chain(first, gen):
    try:
        if first is not None:
            yield first
        async for item in gen:
            yield item
    finally:
        await gen.aclose()


class ClientGone(Exception):
    """The client closed the connection before its (non-streamed) answer was ready."""


async def until_disconnected(raw, coro):
    """Await `coro`, cancelling it (and so its Triton requests) if the client leaves.

    Streams notice a departed client when they write; a non-streamed answer writes only
    at the end, so without this a long generation would run on for nobody.
    """
    if raw is None:
        return await coro
    task = asyncio.ensure_future(coro)

    async def watch():
        while True:
            message = await raw.receive()
            if message["type"] == "http.disconnect":
                return

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    raise ClientGone()


async def _merge(gens: list[AsyncIterator[GenerationChunk]]) -> AsyncIterator[tuple[int, GenerationChunk]]:
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump(i, gen):
        try:
            async for chunk in gen:
                await queue.put((i, chunk))
            await queue.put((i, done))
        except BaseException as err:  # handed to the consumer, which re-raises it
            await queue.put((i, err))

    tasks = [asyncio.create_task(pump(i, g)) for i, g in enumerate(gens)]
    remaining = len(tasks)
    try:
        while remaining:
            i, item = await queue.get()
            if item is done:
                remaining -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield i, item
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

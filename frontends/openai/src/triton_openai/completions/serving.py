"""The logic of /v1/completions."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from fastapi.responses import Response

from ..config import FrontendConfig
from ..generation.fanin import primed
from ..generation.logprobs import completion_logprobs, merge_completion_logprobs
from ..generation.prompts import Prompt
from ..generation.service import GenerationService, tokenize
from ..triton.feed import FeedEnd
from ..triton.vllm_contract import GENERATE
from ..web import sse
from ..web.answers import event_stream_response, json_response, usage
from ..web.errors import BadRequestError
from ..web.request_ids import request_id
from .protocol import CompletionRequest


def _prompts(req: CompletionRequest) -> list[str | list[int]]:
    p = req.prompt
    if isinstance(p, str):
        return [p]
    if all(isinstance(x, int) for x in p):
        return [p]  # one prompt of token ids
    return list(p)


def _tokenized(tok, raw: list[str | list[int]], echo: bool) -> list[Prompt]:
    prompts: list[Prompt] = []
    for p in raw:
        if isinstance(p, str):
            # Tokenized here so that the token budget and usage are exact.
            prompts.append(Prompt(p, tok.encode(p) if tok is not None else None))
        else:
            text = tok.decode(p) if tok is not None and echo else None
            prompts.append(Prompt(text, list(p)))
    return prompts


class CompletionsServing:
    def __init__(self, generation: GenerationService,
                 max_batch_inputs: int = FrontendConfig.max_batch_inputs):
        self.gen = generation
        self.max_batch_inputs = max_batch_inputs

    async def create(self, req: CompletionRequest) -> Response:
        raw = _prompts(req)
        # Before anything else: each prompt costs tokenizing and a Triton request.
        if len(raw) * req.n > self.max_batch_inputs:
            raise BadRequestError(
                f"This request asks for {len(raw) * req.n} completions ({len(raw)} prompts "
                f"x n={req.n}); the server takes at most {self.max_batch_inputs} per request.",
                param="prompt")
        model = await self.gen.catalog.get(req.model, runner=GENERATE)
        if req.suffix:
            raise BadRequestError("suffix is not supported", param="suffix")
        if req.best_of is not None and req.best_of != req.n:
            raise BadRequestError("best_of must equal n", param="best_of")
        if req.echo and req.logprobs is not None:
            raise BadRequestError("echo together with logprobs is not supported", param="echo")
        tok = await self.gen.tokenizer(model)
        size = 0 if tok is None else sum(map(len, raw))
        prompts = await tokenize(size, _tokenized, tok, raw, req.echo)

        samplings = [self.gen.sampling(
            model, p, req.sampling_dict(), max_tokens=req.max_tokens, max_tokens_param="max_tokens",
            prompt_param="prompt", logprobs=req.logprobs,
            structured_outputs=req.structured_outputs) for p in prompts]

        rid = request_id("cmpl")
        created = int(time.time())
        if req.stream and _encodable(req, prompts):
            head = _head(rid, created, model.id)
            encoded = await primed(self.gen.events(model, prompts[0], samplings[0],
                                                   _template(head)))
            return event_stream_response(
                _encoded_events(req, head, prompts[0], encoded), encoded)
        stream = self.gen.run(model, prompts, samplings, req.stream,
                               req.logprobs is not None)
        if req.stream:
            stream = await primed(stream)
            return event_stream_response(
                self._events(req, model.id, rid, created, prompts, stream), stream)
        return await self._full(req, model.id, rid, created, prompts, stream)

    async def _full(self, req, model_id, rid, created, prompts, stream) -> Response:
        n = req.n
        texts = [""] * (len(prompts) * n)
        reasons: list[str | None] = [None] * len(texts)
        lps: list[dict | None] = [None] * len(texts)
        offsets = [0] * len(texts)
        out_tokens = [0] * len(texts)
        in_tokens = [p.num_tokens or 0 for p in prompts]
        if req.echo:
            for pi, p in enumerate(prompts):
                for c in range(n):
                    texts[pi * n + c] = p.text or ""
                    offsets[pi * n + c] = len(p.text or "")
        async for pi, chunk in stream:
            if chunk.num_input_tokens is not None:
                in_tokens[pi] = chunk.num_input_tokens
            for d in chunk.choices:
                i = pi * n + d.index
                texts[i] += d.text
                if d.finish_reason:
                    reasons[i] = d.finish_reason
                if d.num_output_tokens is not None:
                    out_tokens[i] += d.num_output_tokens
                if d.logprobs is not None and req.logprobs is not None:
                    more, offsets[i] = completion_logprobs(d.logprobs, req.logprobs, offsets[i])
                    lps[i] = merge_completion_logprobs(lps[i], more)
        choices = [{"index": i, "text": texts[i], "logprobs": lps[i],
                    "finish_reason": reasons[i] or "stop"} for i in range(len(texts))]
        return json_response({"id": rid, "object": "text_completion", "created": created,
                              "model": model_id, "choices": choices,
                              "usage": usage(sum(in_tokens), sum(out_tokens))})

    async def _events(self, req, model_id, rid, created, prompts, stream) -> AsyncIterator[bytes]:
        n = req.n
        head = _head(rid, created, model_id)
        in_tokens = [p.num_tokens or 0 for p in prompts]
        out_tokens = [0] * (len(prompts) * n)
        offsets = [0] * len(out_tokens)
        continuous = bool(req.stream_options and req.stream_options.usage_in_every_chunk)
        if req.echo:
            for pi, p in enumerate(prompts):
                for c in range(n):
                    offsets[pi * n + c] = len(p.text or "")
                    body = dict(head, choices=[{"index": pi * n + c, "text": p.text or "",
                                                "logprobs": None, "finish_reason": None}])
                    if continuous:
                        body["usage"] = usage(sum(in_tokens), 0)
                    yield sse.event(body)
        async for pi, chunk in stream:
            if chunk.num_input_tokens is not None:
                in_tokens[pi] = chunk.num_input_tokens
            for d in chunk.choices:
                i = pi * n + d.index
                if d.num_output_tokens is not None:
                    out_tokens[i] += d.num_output_tokens
                if not d.text and not d.finish_reason:
                    continue  # a token that ends inside a UTF-8 character: no text yet
                lp = None
                if d.logprobs is not None and req.logprobs is not None:
                    lp, offsets[i] = completion_logprobs(d.logprobs, req.logprobs, offsets[i])
                body = dict(head, choices=[{"index": i, "text": d.text, "logprobs": lp,
                                            "finish_reason": d.finish_reason}])
                if continuous:
                    body["usage"] = usage(sum(in_tokens), sum(out_tokens))
                yield sse.event(body)
        if req.stream_options and req.stream_options.include_usage:
            yield sse.event(dict(head, choices=[], usage=usage(sum(in_tokens), sum(out_tokens))))


def _head(rid: str, created: int, model_id: str) -> dict:
    return {"id": rid, "object": "text_completion", "created": created, "model": model_id}


def _encodable(req: CompletionRequest, prompts: list[Prompt]) -> bool:
    """Whether the backend can write the stream's events itself: one prompt, one choice,
    no echo, no logprobs, usage only at the end."""
    continuous = bool(req.stream_options and req.stream_options.usage_in_every_chunk)
    return (len(prompts) == 1 and req.n == 1 and not req.echo and req.logprobs is None
            and not continuous)


def _template(head: dict) -> tuple[str, str, str]:
    body = dict(head, choices=[{"index": 0, "text": "", "logprobs": None,
                                "finish_reason": None}])
    return sse.template(body, ("choices", 0, "text"), ("choices", 0, "finish_reason"))


async def _encoded_events(req: CompletionRequest, head: dict, prompt: Prompt,
                          stream: AsyncIterator) -> AsyncIterator[bytes]:
    """An encodable stream's events (_encodable): the backend's as they are, then usage."""
    in_tokens, out_tokens = prompt.num_tokens or 0, 0
    async for item in stream:
        if isinstance(item, bytes):
            yield item
        elif isinstance(item, FeedEnd):
            in_tokens = prompt.num_tokens or item.num_input_tokens
            out_tokens = item.num_output_tokens
        else:  # the backend answered on the request itself
            if item.num_input_tokens is not None:
                in_tokens = item.num_input_tokens
            for d in item.choices:
                out_tokens += d.num_output_tokens or 0
                if d.text or d.finish_reason:
                    yield sse.event(dict(head, choices=[{
                        "index": 0, "text": d.text, "logprobs": None,
                        "finish_reason": d.finish_reason}]))
    if req.stream_options and req.stream_options.include_usage:
        yield sse.event(dict(head, choices=[], usage=usage(in_tokens, out_tokens)))

"""The vLLM backend's tensor contract: requests in, per-choice deltas out.

Inputs: text_input or input_ids, stream, sampling_parameters (JSON for vLLM's
SamplingParams), and the return_* switches.  Outputs with n > 1 are arrays of n
elements in choice order; streaming responses carry only new text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from . import vllm_contract as wire
from .client import InferResponse, Tensor, TritonClient, TritonError


@dataclass
class GenerationRequest:
    model: str
    request_id: str
    sampling: dict[str, Any]
    stream: bool
    prompt_text: str | None = None
    prompt_ids: list[int] | None = None
    logprobs: bool = False


@dataclass
class TokenLogprob:
    token: str
    token_id: int | None
    logprob: float
    # (token, logprob) alternatives, most likely first
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class ChoiceDelta:
    index: int
    text: str
    finish_reason: str | None  # None while the choice is unfinished
    num_output_tokens: int | None = None
    logprobs: list[TokenLogprob] | None = None


@dataclass
class GenerationChunk:
    choices: list[ChoiceDelta]
    num_input_tokens: int | None
    final: bool


def build_inputs(req: GenerationRequest) -> tuple[list[Tensor], list[str]]:
    inputs = [_prompt_tensor(req.prompt_text, req.prompt_ids)]
    # Every output costs the backend, Triton and this frontend work on each streamed
    # token: ask only for what is not known here.  The prompt's length is, when the
    # frontend tokenized it.
    count_prompt = req.prompt_ids is None
    inputs += [
        Tensor.bool_(wire.STREAM, req.stream),
        Tensor.bytes_(wire.SAMPLING_PARAMETERS, [json.dumps(req.sampling)]),
        Tensor.bool_(wire.EXCLUDE_INPUT_IN_OUTPUT, True),
        Tensor.bool_(wire.RETURN_FINISH_REASON, True),
        Tensor.bool_(wire.RETURN_NUM_INPUT_TOKENS, count_prompt),
        Tensor.bool_(wire.RETURN_NUM_OUTPUT_TOKENS, True),
        Tensor.bool_(wire.RETURN_LOGPROBS, req.logprobs),
    ]
    outputs = [wire.TEXT_OUTPUT, wire.FINISH_REASON, wire.NUM_OUTPUT_TOKENS]
    if count_prompt:
        outputs.append(wire.NUM_INPUT_TOKENS)
    if req.logprobs:
        outputs.append(wire.LOGPROBS)
    return inputs, outputs


def _prompt_tensor(text: str | None, ids: list[int] | None) -> Tensor:
    if ids is not None:
        return Tensor.int64s(wire.INPUT_IDS, ids)
    return Tensor.bytes_(wire.TEXT_INPUT, [text or ""])


def build_embed_inputs(text: str | None, ids: list[int] | None) -> tuple[list[Tensor], list[str]]:
    inputs = [_prompt_tensor(text, ids), Tensor.bool_(wire.RETURN_NUM_INPUT_TOKENS, True)]
    return inputs, [wire.EMBEDDING, wire.NUM_INPUT_TOKENS]


def _parse_logprob_entry(entry: Any) -> TokenLogprob:
    """One generated token's logprobs, in the backend's JSON.

    Accepted shapes: {"id", "logprob", "token"|"decoded_token", "top_logprobs"|"top"
    : [ {same keys} ... ] | {token_id: {"logprob", "decoded_token"}}}.
    """
    token = entry.get("token", entry.get("decoded_token", entry.get("text", "")))
    token_id = entry.get("id", entry.get("token_id"))
    top_raw = entry.get("top_logprobs", entry.get("top", entry.get("alternatives", [])))
    top: list[tuple[str, float]] = []
    if isinstance(top_raw, dict):
        top_raw = [dict(v, id=k) for k, v in top_raw.items()]
    for alt in top_raw or []:
        top.append((alt.get("token", alt.get("decoded_token", "")) or "", float(alt["logprob"])))
    top.sort(key=lambda t: -t[1])
    return TokenLogprob(token or "", token_id, float(entry["logprob"]), top)


def parse_logprobs(raw: str) -> list[TokenLogprob]:
    data = json.loads(raw) if raw else []
    if isinstance(data, dict):
        data = [data]
    return [_parse_logprob_entry(e) for e in data if e is not None]


def parse_response(resp: InferResponse, n: int) -> GenerationChunk:
    outs = resp.outputs
    texts = outs[wire.TEXT_OUTPUT].as_strings() if wire.TEXT_OUTPUT in outs else []
    reasons = outs[wire.FINISH_REASON].as_strings() if wire.FINISH_REASON in outs else []
    counts = outs[wire.NUM_OUTPUT_TOKENS].as_list() if wire.NUM_OUTPUT_TOKENS in outs else []
    lps = outs[wire.LOGPROBS].as_strings() if wire.LOGPROBS in outs else []
    n_in = outs[wire.NUM_INPUT_TOKENS].as_list() if wire.NUM_INPUT_TOKENS in outs else []
    choices = []
    for i in range(len(texts) if texts else 0):
        reason = reasons[i] if i < len(reasons) else ""
        choices.append(ChoiceDelta(
            index=i,
            text=texts[i],
            finish_reason=reason or None,
            num_output_tokens=int(counts[i]) if i < len(counts) else None,
            logprobs=parse_logprobs(lps[i]) if i < len(lps) else None,
        ))
    return GenerationChunk(choices, int(n_in[0]) if n_in else None, resp.final)


def merge_chunks(first: GenerationChunk, then: GenerationChunk) -> GenerationChunk:
    """One chunk that says what `first` and then `then` say, choice by choice."""
    choices = {c.index: c for c in first.choices}
    for d in then.choices:
        c = choices.get(d.index)
        if c is None:
            choices[d.index] = d
            continue
        merged_logprobs = c.logprobs
        if d.logprobs is not None:
            merged_logprobs = (c.logprobs or []) + d.logprobs
        counts = [x for x in (c.num_output_tokens, d.num_output_tokens) if x is not None]
        choices[d.index] = ChoiceDelta(
            c.index, c.text + d.text, d.finish_reason or c.finish_reason,
            sum(counts) if counts else None, merged_logprobs)
    n_in = first.num_input_tokens if first.num_input_tokens is not None else then.num_input_tokens
    return GenerationChunk(sorted(choices.values(), key=lambda c: c.index), n_in, then.final)


async def generate(client: TritonClient, req: GenerationRequest) -> AsyncIterator[GenerationChunk]:
    """Yield the backend's responses as parsed chunks (empty final responses included).

    Responses that arrived together (the frontend fell behind the engine) become one
    chunk: each chunk costs an event, a write and the client's parsing, so a busy
    frontend catches up instead of falling further behind.
    """
    inputs, outputs = build_inputs(req)
    n = int(req.sampling.get("n", 1) or 1)
    stream = client.stream_infer(req.model, inputs, outputs, req.request_id)
    pending: GenerationChunk | None = None
    try:
        async for resp in stream:
            chunk = parse_response(resp, n)
            if pending is not None:
                chunk = merge_chunks(pending, chunk)
                pending = None
            if resp.more:
                pending = chunk
                continue
            yield chunk
    except TritonError:
        if pending is not None:
            yield pending  # what came before the error still reaches the client
        raise
    finally:
        await stream.aclose()


async def embed(client: TritonClient, model: str, request_id: str,
                text: str | None = None, ids: list[int] | None = None) -> tuple[list[float], int | None]:
    """One embedding from a pooling model: (vector, number of input tokens)."""
    inputs, outputs = build_embed_inputs(text, ids)
    vector, n_in = None, None
    stream = client.stream_infer(model, inputs, outputs, request_id)
    try:
        async for resp in stream:
            if wire.EMBEDDING in resp.outputs:
                vector = resp.outputs[wire.EMBEDDING].as_list()
            if wire.NUM_INPUT_TOKENS in resp.outputs:
                n_in = int(resp.outputs[wire.NUM_INPUT_TOKENS].as_list()[0])
    finally:
        await stream.aclose()
    if vector is None:
        raise TritonError(f"model {model!r} returned no embedding", 500)
    return vector, n_in

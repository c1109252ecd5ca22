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
    inputs = []
    if req.prompt_ids is not None:
        inputs.append(Tensor.int64s("input_ids", req.prompt_ids))
    else:
        inputs.append(Tensor.bytes_("text_input", [req.prompt_text or ""]))
    # Every output costs the backend, Triton and this frontend work on each streamed
    # token: ask only for what is not known here.  The prompt's length is, when the
    # frontend tokenized it.
    count_prompt = req.prompt_ids is None
    inputs += [
        Tensor.bool_("stream", req.stream),
        Tensor.bytes_("sampling_parameters", [json.dumps(req.sampling)]),
        Tensor.bool_("exclude_input_in_output", True),
        Tensor.bool_("return_finish_reason", True),
        Tensor.bool_("return_num_input_tokens", count_prompt),
        Tensor.bool_("return_num_output_tokens", True),
        Tensor.bool_("return_logprobs", req.logprobs),
    ]
    outputs = ["text_output", "finish_reason", "num_output_tokens"]
    if count_prompt:
        outputs.append("num_input_tokens")
    if req.logprobs:
        outputs.append("logprobs")
    return inputs, outputs


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
    texts = outs["text_output"].as_strings() if "text_output" in outs else []
    reasons = outs["finish_reason"].as_strings() if "finish_reason" in outs else []
    counts = outs["num_output_tokens"].as_list() if "num_output_tokens" in outs else []
    lps = outs["logprobs"].as_strings() if "logprobs" in outs else []
    n_in = outs["num_input_tokens"].as_list() if "num_input_tokens" in outs else []
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
    inputs = [Tensor.int64s("input_ids", ids) if ids is not None
              else Tensor.bytes_("text_input", [text or ""])]
    inputs.append(Tensor.bool_("return_num_input_tokens", True))
    vector, n_in = None, None
    stream = client.stream_infer(model, inputs, ["embedding", "num_input_tokens"], request_id)
    try:
        async for resp in stream:
            if "embedding" in resp.outputs:
                vector = resp.outputs["embedding"].as_list()
            if "num_input_tokens" in resp.outputs:
                n_in = int(resp.outputs["num_input_tokens"].as_list()[0])
    finally:
        await stream.aclose()
    if vector is None:
        raise TritonError(f"model {model!r} returned no embedding", 500)
    return vector, n_in

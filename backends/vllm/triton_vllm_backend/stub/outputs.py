"""Build a response's output arrays from vLLM's RequestOutput.

Pure: works on anything shaped like vLLM's RequestOutput/CompletionOutput, returns
{output name: numpy array}; model.py wraps them in Triton tensors.

Streaming requests run with vLLM's DELTA output kind, so each RequestOutput already
carries only what is new (text, tokens, their logprobs); the cumulative logprob is still
the running total.  Complete answers come from the FINAL_ONLY kind, with everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .wire import (
    CUMULATIVE_LOGPROB,
    EMBEDDING,
    FINISH_REASON,
    LOGPROBS,
    NUM_INPUT_TOKENS,
    NUM_OUTPUT_TOKENS,
    TEXT_OUTPUT,
)


@dataclass
class Wanted:
    """Which optional outputs the request asked for."""
    finish_reason: bool = False
    cumulative_logprob: bool = False
    logprobs: bool = False
    num_input_tokens: bool = False
    num_output_tokens: bool = False


def _logprob_entries(token_ids, logprobs) -> list[dict]:
    """One JSON-able entry per generated token: the sampled token and the top-K
    alternatives that vLLM returned with it."""
    entries = []
    if logprobs is None:
        return entries
    for token_id, alternatives in zip(token_ids, logprobs, strict=False):
        chosen = alternatives.get(token_id)
        entries.append({
            "token_id": int(token_id),
            "token": None if chosen is None else chosen.decoded_token,
            "logprob": None if chosen is None else float(chosen.logprob),
            "top_logprobs": [
                {"token_id": int(tid), "token": lp.decoded_token, "logprob": float(lp.logprob),
                 "rank": lp.rank}
                for tid, lp in sorted(alternatives.items(),
                                      key=lambda item: (item[1].rank or 0, item[0]))
            ],
        })
    return entries


def new_tokens(request_output) -> int:
    """The most tokens one choice of a streamed (DELTA) output brought."""
    return max((len(o.token_ids) for o in request_output.outputs), default=0)


def generate_outputs(request_output, n: int, wanted: Wanted,
                     prefix: str = "") -> dict[str, np.ndarray]:
    """Output arrays for one response.

    n: number of choices (the arrays' length; a choice absent from this output is empty).
    prefix: text put before each choice's text (the prompt, unless excluded).
    """
    by_index = {o.index: o for o in request_output.outputs}
    texts, reasons, cumulative, logprobs, counts = [], [], [], [], []
    for i in range(n):
        o = by_index.get(i)
        if o is None:
            # vLLM reports only the choices that moved in this step.
            texts.append("")
            reasons.append("")
            cumulative.append(np.nan)
            logprobs.append("[]")
            counts.append(0)
            continue
        token_ids = o.token_ids
        texts.append(prefix + o.text)
        reasons.append("" if o.finish_reason is None else str(o.finish_reason))
        cumulative.append(np.nan if o.cumulative_logprob is None else o.cumulative_logprob)
        if wanted.logprobs:
            logprobs.append(json.dumps(_logprob_entries(token_ids, o.logprobs)))
        counts.append(len(token_ids))

    out = {TEXT_OUTPUT: np.array([t.encode("utf-8") for t in texts], dtype=np.object_)}
    if wanted.finish_reason:
        out[FINISH_REASON] = np.array([r.encode() for r in reasons], dtype=np.object_)
    if wanted.cumulative_logprob:
        out[CUMULATIVE_LOGPROB] = np.array(cumulative, dtype=np.float32)
    if wanted.logprobs:
        out[LOGPROBS] = np.array([e.encode() for e in logprobs], dtype=np.object_)
    if wanted.num_input_tokens:
        prompt_ids = request_output.prompt_token_ids or []
        out[NUM_INPUT_TOKENS] = np.array([len(prompt_ids)], dtype=np.uint32)
    if wanted.num_output_tokens:
        out[NUM_OUTPUT_TOKENS] = np.array(counts, dtype=np.uint32)
    return out


def pooling_outputs(pooling_output, wanted: Wanted) -> dict[str, np.ndarray]:
    data = pooling_output.outputs.data
    if hasattr(data, "detach"):
        data = data.detach().to("cpu").float().numpy()
    out = {EMBEDDING: np.asarray(data, dtype=np.float32).reshape(-1)}
    if wanted.num_input_tokens:
        out[NUM_INPUT_TOKENS] = np.array([len(pooling_output.prompt_token_ids or [])],
                                           dtype=np.uint32)
    return out

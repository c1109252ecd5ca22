"""Build a response's output arrays from vLLM's RequestOutput.

Pure: works on anything shaped like vLLM's RequestOutput/CompletionOutput, returns
{output name: numpy array}; model.py wraps them in Triton tensors.

Streaming responses carry what is new since the previous response of the same request:
the new text, the new tokens' logprobs, the number of new tokens.  `StreamState` keeps
what was sent per choice.  The cumulative logprob is the running total.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Wanted:
    """Which optional outputs the request asked for."""
    finish_reason: bool = False
    cumulative_logprob: bool = False
    logprobs: bool = False
    num_input_tokens: bool = False
    num_output_tokens: bool = False


@dataclass
class StreamState:
    """Per choice: characters and tokens already sent."""
    n: int = 1
    text_sent: list[int] = field(default_factory=list)
    tokens_sent: list[int] = field(default_factory=list)

    def __post_init__(self):
        self.text_sent = [0] * self.n
        self.tokens_sent = [0] * self.n


def _logprob_entries(token_ids, logprobs, start: int) -> list[dict]:
    """One JSON-able entry per generated token from `start` on: the sampled token and the
    top-K alternatives that vLLM returned with it."""
    entries = []
    if logprobs is None:
        return entries
    for token_id, alternatives in zip(token_ids[start:], logprobs[start:]):
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


def generate_outputs(request_output, n: int, wanted: Wanted, state: StreamState | None,
                     prefix: str = "") -> dict[str, np.ndarray]:
    """Output arrays for one response.

    n: number of choices (the arrays' length; a choice not seen yet is empty).
    state: for streaming, the StreamState of this request (updated); None otherwise.
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
        text = o.text
        token_ids = list(o.token_ids)
        if state is not None:
            text_start, token_start = state.text_sent[i], state.tokens_sent[i]
            state.text_sent[i], state.tokens_sent[i] = len(text), len(token_ids)
        else:
            text_start, token_start = 0, 0
        texts.append((prefix + text) if state is None else text[text_start:])
        reasons.append("" if o.finish_reason is None else str(o.finish_reason))
        cumulative.append(np.nan if o.cumulative_logprob is None else o.cumulative_logprob)
        entries = _logprob_entries(token_ids, o.logprobs, token_start)
        logprobs.append(json.dumps(entries))
        counts.append(len(token_ids) - token_start)

    out = {"text_output": np.array([t.encode("utf-8") for t in texts], dtype=np.object_)}
    if wanted.finish_reason:
        out["finish_reason"] = np.array([r.encode() for r in reasons], dtype=np.object_)
    if wanted.cumulative_logprob:
        out["cumulative_logprob"] = np.array(cumulative, dtype=np.float32)
    if wanted.logprobs:
        out["logprobs"] = np.array([e.encode() for e in logprobs], dtype=np.object_)
    if wanted.num_input_tokens:
        prompt_ids = request_output.prompt_token_ids or []
        out["num_input_tokens"] = np.array([len(prompt_ids)], dtype=np.uint32)
    if wanted.num_output_tokens:
        out["num_output_tokens"] = np.array(counts, dtype=np.uint32)
    return out


def pooling_outputs(pooling_output, wanted: Wanted) -> dict[str, np.ndarray]:
    data = pooling_output.outputs.data
    if hasattr(data, "detach"):
        data = data.detach().to("cpu").float().numpy()
    out = {"embedding": np.asarray(data, dtype=np.float32).reshape(-1)}
    if wanted.num_input_tokens:
        out["num_input_tokens"] = np.array([len(pooling_output.prompt_token_ids or [])],
                                           dtype=np.uint32)
    return out

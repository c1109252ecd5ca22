"""OpenAI's two logprobs layouts, from the backend's per-token entries: completions'
(`completion_logprobs`) and chat completions' (`chat_logprobs`)."""

from __future__ import annotations

from ..triton.vllm_io import TokenLogprob


def completion_logprobs(entries: list[TokenLogprob], k: int, offset: int) -> tuple[dict, int]:
    """{tokens, token_logprobs, top_logprobs, text_offset} and the text offset after them."""
    tokens, lps, tops, offsets = [], [], [], []
    for e in entries:
        tokens.append(e.token)
        lps.append(e.logprob)
        top: dict[str, float] = {}
        for tok, lp in e.top[:k]:
            # Different tokens can decode to the same text (pieces of one UTF-8
            # character); the first, most likely one keeps the key.
            top.setdefault(tok, lp)
        if k and e.token not in top:
            top[e.token] = e.logprob
        tops.append(top)
        offsets.append(offset)
        offset += len(e.token)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops,
            "text_offset": offsets}, offset


def merge_completion_logprobs(into: dict | None, more: dict) -> dict:
    if into is None:
        return more
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        into[key].extend(more[key])
    return into


def _bytes(token: str) -> list[int]:
    return list(token.encode("utf-8"))


def chat_logprobs(entries: list[TokenLogprob], k: int) -> list[dict]:
    """The `content` list of a chat choice's logprobs."""
    return [{
        "token": e.token, "logprob": e.logprob, "bytes": _bytes(e.token),
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": _bytes(t)} for t, lp in e.top[:k]],
    } for e in entries]

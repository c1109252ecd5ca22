"""A client's view of streamed requests (OpenAI chat completions and completions, Triton's
generate_stream): time to first token, and how each stream ended (finished, an error
event, or a silent cut-off)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field

import httpx

from qa.common.sse import aiter_events

PROMPT = [{"role": "user", "content": "Tell me a long story about the sea."}]


@dataclass
class StreamResult:
    status: int = 0
    ttft: float | None = None  # seconds from the request to the first content chunk
    chunks: int = 0
    errors: list[dict] = field(default_factory=list)  # error events (or the error body)
    done: bool = False  # ended well-formed: `data: [DONE]`, or a generate_stream's close
    finish_reason: str | None = None
    broken: str | None = None  # the connection failed (not a well-formed end)

    @property
    def finished(self) -> bool:
        """Ran to its end: a finish reason, then the stream's end."""
        return self.status == 200 and self.done and self.finish_reason is not None \
            and not self.errors

    @property
    def told(self) -> bool:
        """The client learned that the request failed: an error status or error event."""
        return self.status >= 400 or bool(self.errors)

    @property
    def silent(self) -> bool:
        """Ended without finishing and without saying why."""
        return not self.finished and not self.told

    def kind(self) -> str:
        if self.finished:
            return "finished"
        if self.told:
            return f"error {self.status}" if self.status >= 400 else "error event"
        return "silent" if self.broken is None else f"broken ({self.broken})"


def chat_body(model: str, max_tokens: int) -> dict:
    return {"model": model, "messages": PROMPT, "stream": True, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True}


def _content_and_finish(event: dict) -> tuple[bool, str | None]:
    """(whether the event carries generated text, its finish reason) of an OpenAI chunk
    (chat or completions) or a generate_stream event."""
    if "choices" in event:
        texts = [c.get("delta", {}).get("content") or c.get("text") for c in event["choices"]]
        reasons = [c.get("finish_reason") for c in event["choices"]]
    else:
        texts = [event.get("text_output")]
        reason = event.get("finish_reason")  # a list with return_finish_reason
        reasons = reason if isinstance(reason, list) else [reason]
    return any(texts), next((r for r in reasons if r), None)


async def stream(client: httpx.AsyncClient, url: str, body: dict,
                 started: asyncio.Event | None = None) -> StreamResult:
    """One streamed request to `url`; `started` is set when its first content arrives.
    An OpenAI stream ends with [DONE]; Triton's generate_stream just closes."""
    out = StreamResult()
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", url, json=body) as resp:
            out.status = resp.status_code
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                try:
                    out.errors.append(json.loads(text).get("error") or {"message": text})
                except ValueError:
                    out.errors.append({"message": text})
                return out
            async for sse_event in aiter_events(resp):
                if sse_event.done:
                    out.done = True
                    continue
                event = sse_event.json()
                if "error" in event:
                    out.errors.append(event["error"])
                    continue
                content, reason = _content_and_finish(event)
                if content:
                    if out.ttft is None:
                        out.ttft = time.perf_counter() - t0
                        if started is not None:
                            started.set()
                    out.chunks += 1
                out.finish_reason = reason or out.finish_reason
            out.done = out.done or url.endswith("/generate_stream")
    except httpx.HTTPError as err:
        out.broken = type(err).__name__
    return out


async def stream_chat(client: httpx.AsyncClient, url: str, model: str, max_tokens: int,
                      started: asyncio.Event | None = None) -> StreamResult:
    """One streamed chat completion from the frontend at `url`."""
    return await stream(client, f"{url}/v1/chat/completions", chat_body(model, max_tokens),
                        started)


async def batch(url: str, model: str, n: int, max_tokens: int = 16) -> list[StreamResult]:
    """n streamed chat completions at once."""
    limits = httpx.Limits(max_connections=n + 4, max_keepalive_connections=n + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0), limits=limits) as client:
        return list(await asyncio.gather(
            *(stream_chat(client, url, model, max_tokens) for _ in range(n))))


def ttfts(results: list[StreamResult]) -> list[float]:
    missing = [r.kind() for r in results if r.ttft is None]
    assert not missing, f"streams without a first token: {missing}"
    return [r.ttft for r in results]


def summary(label: str, values: list[float]) -> str:
    return (f"{label}: n={len(values)} median={statistics.median(values) * 1000:.0f} ms "
            f"max={max(values) * 1000:.0f} ms")

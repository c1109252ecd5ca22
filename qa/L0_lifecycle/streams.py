"""A client's view of streamed chat completions: time to first token, and how each
stream ended (finished with `[DONE]`, an error event, or a silent cut-off)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import httpx

PROMPT = [{"role": "user", "content": "Tell me a long story about the sea."}]


@dataclass
class StreamResult:
    status: int = 0
    ttft: float | None = None  # seconds from the request to the first content chunk
    chunks: int = 0
    errors: list[dict] = field(default_factory=list)  # error events (or the error body)
    done: bool = False  # `data: [DONE]` arrived
    finish_reason: str | None = None
    broken: str | None = None  # the connection failed (not a well-formed end)

    @property
    def finished(self) -> bool:
        """Ran to its end: a finish reason, then [DONE]."""
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


async def stream_chat(client: httpx.AsyncClient, url: str, model: str, max_tokens: int,
                      started: asyncio.Event | None = None) -> StreamResult:
    """One streamed chat completion; `started` is set when its first chunk arrives."""
    out = StreamResult()
    body = {"model": model, "messages": PROMPT, "stream": True, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True}
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as resp:
            out.status = resp.status_code
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                try:
                    out.errors.append(json.loads(text).get("error") or {"message": text})
                except ValueError:
                    out.errors.append({"message": text})
                return out
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    out.done = True
                    continue
                event = json.loads(data)
                if "error" in event:
                    out.errors.append(event["error"])
                    continue
                for choice in event.get("choices", []):
                    if choice["delta"].get("content"):
                        if out.ttft is None:
                            out.ttft = time.perf_counter() - t0
                            if started is not None:
                                started.set()
                        out.chunks += 1
                    if choice.get("finish_reason"):
                        out.finish_reason = choice["finish_reason"]
    except httpx.HTTPError as err:
        out.broken = type(err).__name__
    return out


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


def wait_ready(url: str, timeout: float, path: str = "/health/ready") -> float:
    """Poll `url + path` every 20 ms until it answers 200; the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            with urllib.request.urlopen(url + path, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.02)
    raise TimeoutError(f"{url}{path} not ready after {timeout:.0f} s")


def get_status(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")

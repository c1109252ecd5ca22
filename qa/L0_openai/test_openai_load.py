"""200 concurrent streaming chats through the frontend: none fails, nothing is lost."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from .conftest import MODEL

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

STREAMS = 200
TOKENS = 24


async def _one(client: openai.AsyncOpenAI, i: int) -> tuple[str, int, str | None, int]:
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": f"Tell me story number {i}."}],
        max_tokens=TOKENS, temperature=0, stream=True, stream_options={"include_usage": True},
        extra_body={"ignore_eos": True})
    text, pieces, finish, usage = "", 0, None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        for ch in chunk.choices:
            if ch.delta.content:
                text += ch.delta.content
                pieces += 1
            finish = ch.finish_reason or finish
    return text, pieces, finish, usage


def test_200_concurrent_streaming_chats(stack):
    async def run():
        client = openai.AsyncOpenAI(
            base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=300,
            http_client=openai.DefaultAsyncHttpxClient(
                limits=__import__("httpx").Limits(max_connections=STREAMS + 10)))
        try:
            start = time.monotonic()
            results = await asyncio.gather(*(_one(client, i) for i in range(STREAMS)),
                                           return_exceptions=True)
            return results, time.monotonic() - start
        finally:
            await client.close()

    results, elapsed = asyncio.run(run())
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of {STREAMS} streams failed, first: {errors[0]!r}"
    for text, pieces, finish, usage in results:
        assert finish == "length"
        # Every token arrived: the usage count is the engine's, the pieces are what we got.
        assert usage == TOKENS
        assert pieces >= 1 and text
    print(f"\n{STREAMS} streams x {TOKENS} tokens in {elapsed:.1f} s "
          f"({STREAMS * TOKENS / elapsed:.0f} tokens/s)")

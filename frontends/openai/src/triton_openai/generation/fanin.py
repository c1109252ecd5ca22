"""Streams of generated chunks: several merged into one (the generation service, for a
request of several prompts), and one started early (the endpoints, so that Triton's
refusal becomes the HTTP status before a stream's headers go out)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")


async def merge(gens: list[AsyncIterator[T]]) -> AsyncIterator[tuple[int, T]]:
    """(index of the source, item) from every source at once, as they come."""
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


async def primed(gen: AsyncIterator[T]) -> AsyncIterator[T]:
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

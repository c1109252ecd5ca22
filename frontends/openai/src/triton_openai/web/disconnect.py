"""Stop the work of a client that has left, before its answer is under way.

A stream notices a departed client when it writes (see sse.EventStreamResponse).  Until
the first byte is written (a non-streamed answer is written only at the end, a stream
only once its first token came) nothing would notice, and a long generation would run on
for nobody: `cancel_on_disconnect` watches the connection while the route works.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .errors import ClientGone

T = TypeVar("T")


async def until_disconnected(raw, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it (and so its Triton requests) if the client leaves,
    which raises ClientGone; `raw` is the request (None: nothing to watch)."""
    if raw is None:
        return await work
    task = asyncio.ensure_future(work)

    async def watch():
        while True:
            message = await raw.receive()
            if message["type"] == "http.disconnect":
                return

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # The request itself was cancelled (cut at shutdown): its work goes with it.
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    raise ClientGone()


def cancel_on_disconnect(route: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A route, cancelled when its client leaves before it returns its response.

    The route takes the request as its parameter `raw`.
    """
    @functools.wraps(route)
    async def watched(*args, **kwargs):
        return await until_disconnected(kwargs["raw"], route(*args, **kwargs))

    return watched

"""Server-sent events: cheap encoding, and a response that stops work when the client leaves."""

from __future__ import annotations

import anyio
import msgspec
from starlette.responses import StreamingResponse

_encode = msgspec.json.Encoder().encode

DONE = b"data: [DONE]\n\n"

# JSON leaves U+0085, U+2028 and U+2029 raw inside strings, but Python's str.splitlines, and
# so httpx's iter_lines() and many hand-written clients, end a line at each: a token holding
# one would cut its event in two.  Escaped, the JSON means the same to every parser.
_LINE_BREAKS_JSON_KEEPS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"),
                           (b"\xe2\x80\xa9", b"\\u2029"))


def event(payload: dict) -> bytes:
    # One msgspec call per chunk: no pydantic model per token.
    data = _encode(payload)
    # The three searches spelled out, not a loop over the table: this runs for every event.
    if b"\xc2\x85" in data or b"\xe2\x80\xa8" in data or b"\xe2\x80\xa9" in data:
        for raw, escaped in _LINE_BREAKS_JSON_KEEPS:
            data = data.replace(raw, escaped)
    return b"data: " + data + b"\n\n"


# Stand-ins for an event's text and finish reason, which template() cuts the event at.
_TEXT, _FINISH = "\x00text\x00", "\x00finish\x00"


def template(body: dict, text_at: tuple, finish_at: tuple) -> tuple[str, str, str]:
    """The event of `body` cut where its text and its finish reason go (each a path of
    keys and indexes into `body`): what comes before the text, between it and the finish
    reason, and after.  The backend fills them in (triton/feed.py), so an event it encodes
    is the one event() would write.  Text before the finish reason, as OpenAI's chunks
    have them."""
    _put(body, text_at, _TEXT)
    _put(body, finish_at, _FINISH)
    data = event(body).decode("utf-8")
    before, rest = data.split(_encode(_TEXT).decode(), 1)
    middle, after = rest.split(_encode(_FINISH).decode(), 1)
    return before, middle, after


def _put(body, path: tuple, value) -> None:
    for step in path[:-1]:
        body = body[step]
    body[path[-1]] = value


def dumps(payload) -> bytes:
    return _encode(payload)


class EventStreamResponse(StreamingResponse):
    """A text/event-stream response that closes its generator as soon as the client is gone.

    Starlette (for ASGI 2.4 servers) only notices a disconnect when a write fails, and
    then leaves the generator to the garbage collector, which may close it seconds later.
    Closing it here at once ends the gRPC stream, so Triton cancels the request and vLLM
    stops generating for nobody.
    """

    media_type = "text/event-stream"

    def __init__(self, content, **kw):
        kw.setdefault("headers", {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        super().__init__(content, media_type=self.media_type, **kw)

    async def __call__(self, scope, receive, send) -> None:
        try:
            async with anyio.create_task_group() as tg:

                async def watch_disconnect():
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(watch_disconnect)
                try:
                    await self.stream_response(send)
                except OSError:
                    pass  # the client went away while we were writing
                tg.cancel_scope.cancel()
        finally:
            await self.body_iterator.aclose()

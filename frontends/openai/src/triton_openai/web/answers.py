"""The two kinds of successful answer: one JSON body, or a stream of events; every
endpoint that generates answers through them."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi.responses import Response

from . import sse
from .errors import as_openai_error


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def json_response(body: dict) -> Response:
    return Response(sse.dumps(body), media_type="application/json")


def event_stream_response(events: AsyncIterator[bytes], upstream) -> sse.EventStreamResponse:
    """`events`, then `data: [DONE]`.  A failure after the headers went out becomes an
    error event in the stream; `upstream` (what feeds the events: the Triton requests)
    is closed however the stream ends, also when the client goes away."""
    return sse.EventStreamResponse(_with_tail(events, upstream))


async def _with_tail(events: AsyncIterator[bytes], upstream) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            yield event
    except Exception as err:  # headers are sent: report the failure inside the stream
        yield sse.event(as_openai_error(err).body())
    finally:
        # Also on GeneratorExit (client gone): end the Triton request now, not at GC.
        await events.aclose()
        await upstream.aclose()
    yield sse.DONE

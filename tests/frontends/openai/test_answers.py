"""A stream's tail: a failure after the headers becomes an error event, then [DONE]."""

import asyncio

from qa.common.sse import events_of
from triton_openai.triton.client import TritonError
from triton_openai.web import sse
from triton_openai.web.answers import event_stream_response


class Upstream:
    closed = False

    async def aclose(self):
        self.closed = True


def collect(events):
    upstream = Upstream()

    async def run():
        response = event_stream_response(events, upstream)
        return [chunk async for chunk in response.body_iterator]

    return asyncio.run(run()), upstream


def test_a_failure_in_the_stream_is_an_error_event_then_done():
    async def events():
        yield sse.event({"n": 1})
        raise TritonError("the request must be shorter", 400)

    chunks, upstream = collect(events())
    assert chunks[0] == sse.event({"n": 1}) and chunks[-1] == sse.DONE
    error = events_of(chunks[1].decode())[0].json()["error"]
    assert (error["type"], error["message"]) == ("invalid_request_error",
                                                 "the request must be shorter")
    assert upstream.closed


def test_a_stream_that_ends_closes_its_upstream_and_says_done():
    async def events():
        yield sse.event({"n": 1})

    chunks, upstream = collect(events())
    assert chunks == [sse.event({"n": 1}), sse.DONE] and upstream.closed

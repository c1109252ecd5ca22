"""Feeds: the vLLM backend's text of every stream of a model on one Triton request, each
stream's events already encoded, one response per engine step.

The backend's feed.py says why and what goes over the wire.  Here, per model, one feed
is opened on first use and read by one task, which hands each record to the stream whose
key it names; a stream's own Triton request then ends with an empty response (or its
error).  What a stream gets, in order (`FeedStream`):

    bytes          an event to write to the client as it is
    FeedEnd        the stream's finish reason and token counts: it has ended
    GenerationChunk  only where the backend served the request on its own responses
                   (the model's other instance had it, which has no such feed)

A feed that fails (the model unloaded, the engine died, the server went away) fails the
streams waiting on it; one that the backend closes because it carried no stream for a
while fails none (a stream sent on it since is answered on its own request).  The next
stream opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from . import vllm_contract as wire
from .client import Tensor, TritonClient, TritonError, deserialize_bytes
from .vllm_io import GenerationChunk, GenerationRequest, build_inputs, parse_response

log = logging.getLogger("triton_openai.triton")

# How long a stream whose request ended waits for its last records on the feed: they
# travel on another gRPC stream, so they may come a little after the request's end.
END_GRACE_S = 10.0
# How long opening a feed may take before streams go without one, and how long a model
# that opened none (another backend, or one without feeds) is not asked again.
OPEN_TIMEOUT_S = 10.0
RETRY_OPEN_S = 60.0


@dataclass(frozen=True)
class FeedEnd:
    finish_reason: str | None
    num_input_tokens: int
    num_output_tokens: int


_FINAL = object()  # the stream's own Triton request ended


class _Feed:
    def __init__(self, client: TritonClient, model: str):
        self.id = secrets.token_hex(16)
        self._client = client
        self._model = model
        # Keyed by the bytes the records carry: no decoding per record.
        self._streams: dict[bytes, _Inbox] = {}
        self.opened: asyncio.Future = asyncio.get_running_loop().create_future()
        self.ended = False
        self._task = asyncio.create_task(self._read(), name=f"feed-{model}")

    def subscribe(self, key: bytes) -> _Inbox:
        inbox = self._streams[key] = _Inbox()
        return inbox

    def unsubscribe(self, key: bytes) -> None:
        self._streams.pop(key, None)

    async def _read(self) -> None:
        # None when the backend closes the feed (it carried no stream for a while):
        # a stream sent on it since is answered on its own request.
        error: BaseException | None = None
        responses = self._client.stream_infer(
            # Its own request id, not the feed's: the id is what lets a request send to
            # the feed, and request ids go into logs.
            self._model, [], [wire.TEXT_OUTPUT], f"feed-{secrets.token_hex(6)}",
            parameters={wire.FEED_OPEN_PARAMETER: self.id})
        try:
            async for response in responses:
                if not self.opened.done():
                    self.opened.set_result(True)
                records = response.outputs.get(wire.TEXT_OUTPUT)
                if isinstance(records, Tensor):  # gRPC, in process: the raw bytes
                    self._deliver(deserialize_bytes(records.data))
                elif records is not None:  # HTTP: already parsed, as strings
                    self._deliver([r.encode("utf-8") for r in records.as_strings()])
                if response.final:
                    break
        except TritonError as err:
            error = err
        except asyncio.CancelledError:
            error = TritonError("the server is shutting down", 503)
            raise
        except Exception as err:  # noqa: BLE001 - every stream waiting must hear of it
            log.exception("feed of %s failed", self._model)
            error = TritonError(f"the feed of model {self._model!r} failed: {err}", 500)
        finally:
            self.ended = True
            if not self.opened.done():
                self.opened.set_exception(error or TritonError(
                    f"model {self._model!r} ended its feed as it opened", 503))
                self.opened.exception()  # retrieved: nobody may be waiting
            if error is not None:
                for inbox in self._streams.values():
                    inbox.put(error)
            self._streams.clear()
            await responses.aclose()

    def _deliver(self, records: list[bytes]) -> None:
        streams = self._streams
        for i in range(0, len(records) - 1, 2):
            inbox = streams.get(records[i])
            if inbox is not None:  # else a stream that went away
                inbox.put(records[i + 1])

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


class Feeds:
    """One feed per model, opened on first use, for streams that can go on one."""

    def __init__(self, client: TritonClient):
        self._client = client
        self._feeds: dict[str, _Feed] = {}
        self._refused: dict[str, float] = {}  # model -> when it opened no feed
        self._keys = itertools.count()

    async def _feed(self, model: str) -> _Feed | None:
        loop = asyncio.get_running_loop()
        if loop.time() - self._refused.get(model, -RETRY_OPEN_S) < RETRY_OPEN_S:
            return None
        feed = self._feeds.get(model)
        if feed is None or feed.ended:
            feed = self._feeds[model] = _Feed(self._client, model)
        try:
            await asyncio.wait_for(asyncio.shield(feed.opened), OPEN_TIMEOUT_S)
        except (TritonError, TimeoutError) as err:
            # e.g. a model of another backend, or a vLLM backend without feeds: its
            # streams go on their own requests for a while.
            log.info("model %s opened no feed (%s): its streams go on their own requests",
                     model, err)
            self._refused[model] = loop.time()
            await feed.close()
            return None
        return feed

    async def stream(self, req: GenerationRequest, event: tuple[str, str, str]
                     ) -> AsyncIterator[bytes | FeedEnd | GenerationChunk]:
        """One stream's events on its model's feed (or, where there is none, its chunks);
        `event` is the text around each event's text and finish reason."""
        feed = await self._feed(req.model)
        if feed is None:
            async for chunk in _own_responses(self._client, req, {}):
                yield chunk
            return
        key = str(next(self._keys))
        record_key = key.encode()  # as the records carry it
        inbox = feed.subscribe(record_key)
        parameters = {wire.FEED_PARAMETER: feed.id, wire.FEED_KEY_PARAMETER: key,
                      wire.FEED_EVENT_PARAMETER: json.dumps(list(event))}
        pump = asyncio.create_task(_pump(self._client, req, parameters, inbox))
        try:
            async for item in _read(inbox):
                yield item
        finally:
            feed.unsubscribe(record_key)
            if not pump.done():
                pump.cancel()  # closes the request's stream: Triton cancels it
            with contextlib.suppress(BaseException):
                await pump

    async def close(self) -> None:
        for feed in self._feeds.values():
            await feed.close()
        self._feeds.clear()


async def _own_responses(client: TritonClient, req: GenerationRequest, parameters: dict
                         ) -> AsyncIterator[GenerationChunk]:
    inputs, outputs = build_inputs(req)
    responses = client.stream_infer(req.model, inputs, outputs, req.request_id,
                                    parameters=parameters)
    try:
        async for response in responses:
            yield parse_response(response, 1)
    finally:
        await responses.aclose()


async def _pump(client: TritonClient, req: GenerationRequest, parameters: dict,
                inbox: _Inbox) -> None:
    """The stream's own request: its end (or error) to the inbox, and its chunks where
    the backend answers on the request itself."""
    try:
        async for chunk in _own_responses(client, req, parameters):
            if chunk.choices:
                inbox.put(chunk)
        inbox.put(_FINAL)
    except Exception as err:  # noqa: BLE001 - handed to the stream, which raises it
        inbox.put(err)


class _Inbox:
    """What the feed and the stream's own request hand one stream, taken all at once."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque = deque()
        self._waiter: asyncio.Future | None = None

    def put(self, item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> deque:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        items, self._items = self._items, deque()
        return items


async def _read(inbox: _Inbox) -> AsyncIterator[bytes | FeedEnd | GenerationChunk]:
    ended = own = final = False  # the feed's end record came; the request answered on
    # its own; the request ended
    while not (final and (ended or own)):
        if final:
            try:
                items = await asyncio.wait_for(inbox.take(), END_GRACE_S)
            except TimeoutError:
                raise TritonError("the stream's request ended, but its last events never "
                                  "came on the feed", 503) from None
        else:
            items = await inbox.take()
        # Events that waited here (this process fell behind the engine) go out in one
        # write: each write costs a send, a proxy's hop and a wakeup of the client,
        # whatever it carries.
        events = b""
        for item in items:
            if isinstance(item, bytes):
                lead = item[:1]
                if lead == wire.FEED_DATA:
                    events += item[1:]
                    continue
                if events:
                    yield events
                    events = b""
                if lead == wire.FEED_END:
                    end = json.loads(item[1:])
                    ended = True
                    yield FeedEnd(end.get("finish_reason"), int(end.get("num_input_tokens", 0)),
                                  int(end.get("num_output_tokens", 0)))
                continue
            if events:
                yield events
                events = b""
            if item is _FINAL:
                final = True
            elif isinstance(item, BaseException):
                raise item
            else:
                own = True
                yield item
        if events:
            yield events

"""Feeds: one Triton response per engine step for every stream a client reads, each
stream's text already encoded as the event its client receives.

Every streamed response costs the same on each hop past the engine whatever it carries:
a pb_utils response and a shared-memory round trip here, a gRPC message in tritonserver,
a message and an event in the frontend.  Sent per stream and per token, those costs, not
the engine, bound how many tokens a second a model streams.  A client that reads many
streams (the OpenAI frontend) therefore opens one long request, its feed:

    request parameters: {"vllm_feed_open": "<32 hex digits: the feed's id>"}

which is answered with an empty response at once (the feed is open), then with one
response for each step of the engine that moved a stream sent on it, until the client
cancels it.  A streaming request sent on the feed names it, its key on it, and the text
around each event:

    request parameters: {"vllm_feed": "<feed id>", "vllm_feed_key": "<key>",
                         "vllm_feed_event": "[PREFIX, MIDDLE, SUFFIX]" (JSON)}

Its text then goes out on the feed, as records in the response's `text_output` (key,
record, key, record, ...):

    b"d" PREFIX + text as a JSON string + MIDDLE + finish reason (JSON) + SUFFIX
    b"e" {"finish_reason": ..., "num_input_tokens": ..., "num_output_tokens": ...}

the second after its last text: the request has ended.  The request itself gets an empty
final response, or its error, as any other.  The client writes the records' bytes as
they are: the text is encoded once, here, and nothing on the way parses it.

A request that names a feed this instance does not have (a model with several instances:
Triton sends each request to one of them) is served as if it named none, with its text in
its own responses.  The feed's id is what keeps one client out of another's feed: it is
random, and a request can only send its own text to it.

Pure (no Triton, no vLLM): model.py hands each feed a function that sends a list of
records as one response.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from .params import request_parameters
from .wire import (
    FEED_END,
    FEED_EVENT_PARAMETER,
    FEED_KEY_PARAMETER,
    FEED_OPEN_PARAMETER,
    FEED_PARAMETER,
    FINISH_REASON,
    NUM_INPUT_TOKENS,
    NUM_OUTPUT_TOKENS,
)

# Feeds one instance keeps open at once: each holds a request in Triton.
MAX_FEEDS = 256
# Seconds a feed that carries no stream stays open.  An open feed is a request in flight,
# which Triton waits for before it unloads the model (its shutdown included): a client
# that is gone, or a server that stops, must not keep it.  The client opens another when
# a stream needs one.
IDLE_S = 2.0
_FEED_ID = re.compile(r"[0-9a-f]{32}")
MAX_KEY_LENGTH = 64
# The text around an event: an OpenAI chunk's head and tail are well under this.
MAX_EVENT_TEXT = 4096

_encode = msgspec.json.Encoder().encode
# As the frontend's SSE events (triton_openai/web/sse.py): JSON leaves these raw in strings,
# and many clients end a line at each.
_LINE_BREAKS_JSON_KEEPS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"),
                           (b"\xe2\x80\xa9", b"\\u2029"))


class FeedError(ValueError):
    """A feed request, or a request sent on a feed, that cannot be served as asked."""


def json_string(text: str) -> bytes:
    data = _encode(text)
    if b"\xc2\x85" in data or b"\xe2\x80\xa8" in data or b"\xe2\x80\xa9" in data:
        for raw, escaped in _LINE_BREAKS_JSON_KEEPS:
            data = data.replace(raw, escaped)
    return data


@dataclass(frozen=True)
class EventTemplate:
    """The bytes around a stream's text and finish reason in each of its events."""
    prefix: bytes
    middle: bytes
    suffix: bytes

    def event(self, text: str, finish: str | None) -> bytes:
        reason = b"null" if finish is None else json_string(finish)
        return b"".join((self.prefix, json_string(text), self.middle, reason, self.suffix))


@dataclass(frozen=True)
class Delivery:
    """Where a request's text goes: a feed, its key there, and its events' template."""
    feed_id: str
    key: bytes
    template: EventTemplate


def open_request(parameters: str | dict | None) -> str | None:
    """The id of the feed a request opens, or None when it opens none."""
    parameters = request_parameters(parameters)
    if FEED_OPEN_PARAMETER not in parameters:
        return None
    feed_id = parameters[FEED_OPEN_PARAMETER]
    if not isinstance(feed_id, str) or not _FEED_ID.fullmatch(feed_id):
        raise FeedError(f"parameter '{FEED_OPEN_PARAMETER}' must be 32 lowercase hex digits")
    return feed_id


def delivery_of(parameters: str | dict | None) -> Delivery | None:
    """Where a request's parameters ask its text to go, or None (its own responses)."""
    parameters = request_parameters(parameters)
    if FEED_PARAMETER not in parameters:
        return None
    feed_id, key = parameters[FEED_PARAMETER], parameters.get(FEED_KEY_PARAMETER)
    if not isinstance(feed_id, str) or not _FEED_ID.fullmatch(feed_id):
        raise FeedError(f"parameter '{FEED_PARAMETER}' must be 32 lowercase hex digits")
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise FeedError(f"parameter '{FEED_KEY_PARAMETER}' must be a string of 1 to "
                        f"{MAX_KEY_LENGTH} characters")
    raw = parameters.get(FEED_EVENT_PARAMETER)
    try:
        parts = json.loads(raw) if isinstance(raw, str) and len(raw) <= MAX_EVENT_TEXT else None
    except json.JSONDecodeError:
        parts = None
    if not (isinstance(parts, list) and len(parts) == 3 and all(isinstance(p, str) for p in parts)):
        raise FeedError(f"parameter '{FEED_EVENT_PARAMETER}' must be a JSON list of three strings, "
                        f"at most {MAX_EVENT_TEXT} characters in all")
    template = EventTemplate(*(p.encode("utf-8") for p in parts))
    return Delivery(feed_id, key.encode("utf-8"), template)


def sampling_of(parameters: str | dict | None) -> str | None:
    """A request's parameters without the feed's: what is left are its sampling
    parameters, where it sends them as parameters (jobs.read_generate_inputs)."""
    parameters = dict(request_parameters(parameters))
    for name in (FEED_PARAMETER, FEED_KEY_PARAMETER, FEED_EVENT_PARAMETER):
        parameters.pop(name, None)
    return json.dumps(parameters) if parameters else None


def end_record(finish: str | None, num_input_tokens: int, num_output_tokens: int) -> bytes:
    return FEED_END + _encode({FINISH_REASON: finish, NUM_INPUT_TOKENS: num_input_tokens,
                               NUM_OUTPUT_TOKENS: num_output_tokens})


class Feed:
    """One open feed: the records waiting for the next response, and what sends it."""

    def __init__(self, held: Any, send: Callable[[list[bytes]], None],
                 schedule: Callable[[Callable[[], None]], Any], now: float = 0.0):
        self.held = held  # the feed's request and sender: it lives while they do
        self._send = send
        self._schedule = schedule
        self._records: list[bytes] = []
        self.streams = 0  # streams being sent on it
        self.idle_since = now  # when its last stream ended (or it opened)

    def idle(self, now: float) -> bool:
        """Whether it has carried no stream for IDLE_S seconds."""
        return self.streams == 0 and now - self.idle_since >= IDLE_S

    def put(self, key: bytes, record: bytes) -> None:
        """Add a record; the first of a step schedules the response that carries them
        all, after the other streams that this engine step moved have added theirs."""
        if not self._records:
            self._schedule(self.flush)
        self._records += (key, record)

    def flush(self) -> None:
        if self._records:
            records, self._records = self._records, []
            self._send(records)


class Feeds:
    """The feeds open on one model instance, by id; all on the engine's event loop."""

    def __init__(self, max_feeds: int = MAX_FEEDS):
        self._open: dict[str, Feed] = {}
        self._max = max_feeds

    def open(self, feed_id: str, feed: Feed) -> None:
        if feed_id in self._open:
            raise FeedError(f"feed {feed_id} is open already")
        if len(self._open) >= self._max:
            raise FeedError(f"this model instance has {self._max} feeds open, the most it "
                            f"keeps: close one first")
        self._open[feed_id] = feed

    def get(self, feed_id: str) -> Feed | None:
        return self._open.get(feed_id)

    def close(self, feed_id: str) -> Feed | None:
        return self._open.pop(feed_id, None)

    def items(self) -> list[tuple[str, Feed]]:
        return list(self._open.items())

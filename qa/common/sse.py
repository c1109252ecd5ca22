"""Reading server-sent events as a client does, for the suites, unit tests and benchmarks.

Follows the event-stream rules of the HTML standard: an event is the `data:` lines up to a
blank line, joined by newlines; `event:` names it and `id:` numbers it; a line starting
with `:` is a comment; one space after a field's colon is not part of its value; an event
the stream ends before finishing (no blank line after it) is dropped.  The OpenAI API's
end of stream, `data: [DONE]`, comes through as an event whose `done` is true.

    with httpx.stream("POST", url, json=body) as r:
        for event in iter_events(r):
            ...
    async for event in aiter_events(resp): ...
    events_of(resp.text)    # a whole body at once
    json_until_done(resp.text)  # a whole OpenAI stream's chunks, checked to end with [DONE]

Lines end only at CR, LF or CRLF.  httpx's `iter_lines()` also ends them at U+0085, U+2028,
U+2029 and other characters that a JSON encoder leaves unescaped inside strings, so a token
holding one would cut an event in two: streams are read from the response's text instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

DONE = "[DONE]"
_LINE_END = re.compile(r"\r\n|\r|\n")


class _Response(Protocol):  # httpx.Response, or anything that streams its text as it does
    def iter_text(self) -> Iterator[str]: ...


class _AsyncResponse(Protocol):
    def aiter_text(self) -> AsyncIterator[str]: ...


@dataclass(frozen=True)
class Event:
    data: str
    event: str = "message"  # the type a browser would dispatch it as
    id: str | None = None

    @property
    def done(self) -> bool:
        """The OpenAI API's end of stream."""
        return self.data == DONE

    def json(self) -> Any:
        try:
            return json.loads(self.data)
        except ValueError as err:
            raise ValueError(f"SSE event data is not JSON: {self.data[:200]!r}") from err


class _Reader:
    """Turns lines (without their line ends) into events, one line at a time."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._first = True

    def feed(self, line: str) -> Event | None:
        if self._first:
            self._first = False
            line = line.removeprefix("\ufeff")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        # `retry` tells a reconnecting browser when to retry; any other field is ignored.
        return None

    def _dispatch(self) -> Event | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return Event("\n".join(data), event or "message", self._id)


class _Lines:
    """Splits text that arrives in pieces into lines, at the event stream's line ends only."""

    def __init__(self) -> None:
        self._rest = ""
        self._after_cr = False  # a CR ended the last piece: an LF starting the next is its pair

    def feed(self, text: str) -> list[str]:
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = text.endswith("\r")
        *lines, self._rest = _LINE_END.split(self._rest + text)
        return lines


class _Parser:
    """Events from text that arrives in pieces: lines split as the standard says, then read."""

    def __init__(self) -> None:
        self._lines, self._reader = _Lines(), _Reader()

    def feed(self, piece: str) -> Iterator[Event]:
        for line in self._lines.feed(piece):
            if (event := self._reader.feed(line)) is not None:
                yield event


def _events(pieces: Iterable[str]) -> Iterator[Event]:
    parser = _Parser()
    for piece in pieces:
        yield from parser.feed(piece)


def iter_events(response: _Response) -> Iterator[Event]:
    """The events of a streamed response, each as soon as it ends."""
    return _events(response.iter_text())


async def aiter_events(response: _AsyncResponse) -> AsyncIterator[Event]:
    """The events of a streamed response (httpx.AsyncClient.stream), each as soon as it ends."""
    parser = _Parser()
    async for piece in response.aiter_text():
        for event in parser.feed(piece):
            yield event


def events_of(text: str) -> list[Event]:
    """Every event of a whole event-stream body."""
    return list(_events([text]))


def json_until_done(text: str) -> list[Any]:
    """The JSON data of each event of a whole OpenAI stream, which must end with [DONE]."""
    *events, last = events_of(text) or [None]
    if last is None or not last.done:
        raise ValueError(f"the stream does not end with data: [DONE]: ...{text[-300:]!r}")
    return [event.json() for event in events]

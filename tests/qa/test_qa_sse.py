"""qa.common.sse: reading server-sent events the way the event-stream rules say."""

from __future__ import annotations

import asyncio
import json

import pytest

from qa.common.sse import Event, aiter_events, events_of, iter_events, json_until_done


def test_an_event_is_its_data_lines_joined_by_newlines_up_to_a_blank_line():
    assert events_of("data: one\ndata: two\n\ndata: three\n\n") == [
        Event("one\ntwo"), Event("three")]


def test_event_and_id_fields_and_comments():
    body = ": keep-alive\nevent: response.created\nid: 7\ndata: {}\n\ndata: x\n\n"
    assert events_of(body) == [Event("{}", "response.created", "7"),
                               Event("x", "message", "7")]  # the last id carries on


def test_one_space_after_the_colon_is_dropped_and_no_space_is_fine():
    assert [e.data for e in events_of("data:x\n\ndata:  y\n\ndata\n\n")] == ["x", " y", ""]


def test_a_blank_line_without_data_dispatches_nothing_and_resets_the_type():
    assert events_of("event: ping\n\n\ndata: x\n\n") == [Event("x")]


def test_an_event_the_stream_cuts_short_is_dropped():
    assert events_of("data: whole\n\ndata: cut") == [Event("whole")]


def test_every_line_end_and_a_leading_byte_order_mark():
    assert events_of("\ufeffdata: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        Event("a"), Event("b"), Event("c")]


def test_unknown_fields_and_retry_are_ignored():
    assert events_of("retry: 10\nfoo: bar\ndata: x\n\n") == [Event("x")]


def test_done_and_json():
    first, last = events_of('data: {"a": [1]}\n\ndata: [DONE]\n\n')
    assert first.json() == {"a": [1]} and not first.done
    assert last.done
    with pytest.raises(ValueError, match="not JSON: '\\[DONE\\]'"):
        last.json()


class _Streamed:
    """A response whose text arrives in the given pieces, as httpx streams it."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    def iter_text(self):
        return iter(self.pieces)

    async def aiter_text(self):
        for piece in self.pieces:
            yield piece


def test_events_of_a_response_as_its_text_arrives():
    streamed = _Streamed("da", "ta: a\r", "\n\r\nda", "ta: b\n", "\ndata: cut")
    assert [e.data for e in iter_events(streamed)] == ["a", "b"]

    async def collect():
        return [e.data async for e in aiter_events(streamed)]
    assert asyncio.run(collect()) == ["a", "b"]


def test_a_cr_ending_a_piece_pairs_with_the_lf_that_starts_the_next_only():
    assert [e.data for e in iter_events(_Streamed("data: a\r", "\n", "\n"))] == ["a"]
    assert [e.data for e in iter_events(_Streamed("data: a\r", "\r"))] == ["a"]


@pytest.mark.parametrize("character", ["\x85", "\u2028", "\u2029"])
def test_unicode_line_breaks_in_json_strings_stay_inside_the_event(character):
    """JSON encoders leave these unescaped in strings; only CR and LF end an event's line."""
    chunk = json.dumps({"content": "a" + character + "b"}, ensure_ascii=False)
    assert character in chunk
    raw = "data: " + chunk + "\n\ndata: [DONE]\n\n"
    for pieces in ([raw], list(raw)):
        events = list(iter_events(_Streamed(*pieces)))
        assert [e.done for e in events] == [False, True]
        assert events[0].json() == {"content": "a" + character + "b"}


def test_json_until_done():
    assert json_until_done('data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n') == [
        {"n": 1}, {"n": 2}]
    for cut in ('data: {"n": 1}\n\n', "", 'data: [DONE]\n\ndata: {"n": 1}\n\n'):
        with pytest.raises(ValueError, match="does not end with data: \\[DONE\\]"):
            json_until_done(cut)

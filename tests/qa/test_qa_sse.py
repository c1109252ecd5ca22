"""qa.common.sse: reading server-sent events the way the event-stream rules say."""

from __future__ import annotations

import asyncio

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


def test_lines_as_they_come():
    lines = ["data: a", "", "data: b"]
    assert [e.data for e in iter_events(iter(lines))] == ["a"]

    async def alines():
        for line in ["data: a", "", "data: b", ""]:
            yield line

    async def collect():
        return [e.data async for e in aiter_events(alines())]
    assert asyncio.run(collect()) == ["a", "b"]


def test_json_until_done():
    assert json_until_done('data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n') == [
        {"n": 1}, {"n": 2}]
    for cut in ('data: {"n": 1}\n\n', "", 'data: [DONE]\n\ndata: {"n": 1}\n\n'):
        with pytest.raises(ValueError, match="does not end with data: \\[DONE\\]"):
            json_until_done(cut)

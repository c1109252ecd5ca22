"""triton_openai.web.sse: one event per chunk, whole to any client that splits lines."""

import json

import pytest

from qa.common.sse import events_of
from triton_openai.web import sse


def test_an_event_is_one_data_line_and_a_blank_line():
    assert sse.event({"a": [1, "x"]}) == b'data: {"a":[1,"x"]}\n\n'


@pytest.mark.parametrize("character", ["\x85", "\u2028", "\u2029"])
def test_line_breaks_json_keeps_raw_are_escaped_so_splitlines_keeps_the_event_whole(character):
    payload = {"delta": {"content": f"a{character}b “quoted” é"}}
    text = sse.event(payload).decode()
    assert text.splitlines() == [text.removesuffix("\n\n"), ""]  # as httpx's iter_lines does
    assert json.loads(text.removeprefix("data: ")) == payload
    assert [e.json() for e in events_of(text)] == [payload]
    assert "“quoted” é" in text  # other characters stay as they were

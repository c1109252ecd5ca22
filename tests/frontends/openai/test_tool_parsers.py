import json

import pytest

from triton_openai.tool_parsers import get_parser


def test_llama3_json_single_and_multiple():
    p = get_parser("llama3_json")
    content, calls = p.parse('{"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {}}')
    assert content is None and [c.name for c in calls] == ["f", "g"]
    assert json.loads(calls[0].arguments) == {"x": 1}
    assert p.parse("just text") == ("just text", [])
    assert p.parse('{"not": "a call"}')[1] == []
    assert p.may_be_call(' {"na') and not p.may_be_call("Hello")


def test_mistral():
    p = get_parser("mistral")
    content, calls = p.parse('[TOOL_CALLS][{"name": "f", "arguments": {"y": "z"}}]')
    assert content is None and calls[0].name == "f" and json.loads(calls[0].arguments) == {"y": "z"}
    assert p.may_be_call("[TOOL") and not p.may_be_call("Sure")


def test_unknown_parser():
    with pytest.raises(ValueError):
        get_parser("nope")

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


def test_hermes_calls_after_content():
    p = get_parser("hermes")
    text = ('Let me look.\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n'
            '<tool_call>{"name": "g", "arguments": {}}</tool_call>')
    content, calls = p.parse(text)
    assert content == "Let me look." and [c.name for c in calls] == ["f", "g"]
    assert json.loads(calls[0].arguments) == {"x": 1}
    assert p.parse("<tool_call>not json</tool_call>") == ("<tool_call>not json</tool_call>", [])
    assert p.may_be_call("<tool_") and p.may_be_call(" <tool_call>{") and not p.may_be_call("Hi")


def test_pythonic_calls():
    p = get_parser("pythonic")
    content, calls = p.parse('[get_weather(city="Paris", days=2), math.add(a=[1, 2])]')
    assert content is None and [c.name for c in calls] == ["get_weather", "math.add"]
    assert json.loads(calls[0].arguments) == {"city": "Paris", "days": 2}
    assert json.loads(calls[1].arguments) == {"a": [1, 2]}
    assert p.parse("<|python_start|>[f()]<|python_end|>")[1][0].name == "f"
    for text in ("[f(x)]", "[f(a=g())]", "[1, 2]", "[]", "hello", "[f(a=1"):
        assert p.parse(text) == (text, [])
    assert p.may_be_call("[") and not p.may_be_call("The")


def test_every_parser_is_listed():
    from triton_openai.tool_parsers import parser_names

    assert parser_names() == ["hermes", "llama3_json", "mistral", "pythonic"]

"""Reasoning parsers: the same split for a complete answer and for any streaming of it."""

import pytest

from triton_openai.reasoning import get_parser, parser_names

CASES = [
    # parser, text, (reasoning, content)
    ("deepseek_r1", "<think>a b</think>\n\nanswer", ("a b", "\n\nanswer")),
    ("deepseek_r1", "a b</think>answer", ("a b", "answer")),  # the template wrote <think>
    ("deepseek_r1", "thinking until the budget ran out", ("thinking until the budget ran out", "")),
    ("qwen3", "<think>\nhm\n</think>\n\nok", ("\nhm\n", "\n\nok")),
    ("qwen3", "just an answer", ("", "just an answer")),
    ("qwen3", "<think>cut off", ("cut off", "")),
]


@pytest.mark.parametrize("name,text,expected", CASES)
def test_split(name, text, expected):
    assert get_parser(name).split(text) == expected


@pytest.mark.parametrize("name,text,expected", CASES)
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_any_streaming_gives_the_same_split(name, text, expected, size):
    stream = get_parser(name).stream()
    reasoning = content = ""
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
    for k, piece in enumerate(pieces):
        r, c = stream.feed(piece, final=k == len(pieces) - 1)
        reasoning, content = reasoning + r, content + c
        assert "<think>" not in reasoning + content and "</think>" not in reasoning + content
    assert (reasoning, content) == expected


def test_names():
    assert parser_names() == ["deepseek_r1", "qwen3"]
    with pytest.raises(ValueError, match="deepseek_r1"):
        get_parser("nope")

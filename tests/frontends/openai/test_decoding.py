"""The one decoder of generated text, for chat completions and the Responses API: tool
calls held back and read, reasoning split off, tested once rather than per API surface."""

import json

from triton_openai.conversation.decoding import Decoder
from triton_openai.conversation.tools import ToolUse
from triton_openai.reasoning import get_parser as get_reasoning_parser
from triton_openai.tool_parsers import get_parser

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def _auto(parser="hermes") -> ToolUse:
    return ToolUse("auto", get_parser(parser))


def _feed(decoder: Decoder, deltas: list[str], finish: str = "stop"):
    choice = decoder.choice(0)
    return [choice.feed(text, finish if k == len(deltas) - 1 else None)
            for k, text in enumerate(deltas)]


def test_text_that_cannot_be_a_call_is_sent_with_its_first_token():
    pieces = _feed(Decoder(_auto()), ["Hello", " there"])
    assert [p.content for p in pieces] == ["Hello", " there"]
    assert pieces[-1].finish == "stop" and not pieces[-1].calls


def test_text_that_may_be_a_call_is_held_until_it_cannot_be():
    pieces = _feed(Decoder(_auto()), ["<tool", "s are", " fun"])
    assert [p.content for p in pieces] == ["", "<tools are", " fun"]


def test_a_held_call_is_read_at_the_finish():
    pieces = _feed(Decoder(_auto()), [CALL[:7], CALL[7:30], CALL[30:]])
    assert [p.content for p in pieces] == ["", "", ""]
    last = pieces[-1]
    assert last.finish == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in last.calls] == [
        ("get_weather", {"city": "Paris"})]


def test_held_text_that_is_no_valid_call_is_sent_at_the_finish():
    pieces = _feed(Decoder(_auto()), ["<tool_call>", "not json"])
    assert pieces[-1].content == "<tool_call>not json"
    assert pieces[-1].finish == "stop" and not pieces[-1].calls


def test_a_choice_cut_by_the_budget_keeps_its_text():
    pieces = _feed(Decoder(_auto()), [CALL[:20]], finish="length")
    assert pieces[-1].content == CALL[:20] and pieces[-1].finish == "length"


def test_required_calls_parse_the_constrained_json_one_without_parallel_calls():
    tools = ToolUse("required", get_parser("hermes"), constraint={"json": {}}, parallel=False)
    text = json.dumps([{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}])
    last = _feed(Decoder(tools), [text[:5], text[5:]])[-1]
    assert [c.name for c in last.calls] == ["a"] and last.finish == "tool_calls"


def test_a_named_call_streams_its_arguments_and_keeps_its_id():
    tools = ToolUse("named", get_parser("hermes"), named="f", constraint={"json": {}})
    decoder = Decoder(tools)
    pieces = _feed(decoder, ['{"a"', ": 1}"])
    assert [p.content for p in pieces] == ['{"a"', ": 1}"] and not pieces[-1].calls
    whole = decoder.whole(0, '{"a": 1}', "stop")
    assert whole.content is None
    assert [(c.name, c.arguments, c.id) for c in whole.calls] == [
        ("f", '{"a": 1}', tools.named_call(0).id)]


def test_reasoning_is_split_off_before_the_answer_and_a_partial_tag_waits():
    decoder = Decoder(ToolUse("none", get_parser("hermes")), get_reasoning_parser("deepseek_r1"))
    pieces = _feed(decoder, ["<think>hm", " ok</th", "ink>The answer"])
    assert [(p.reasoning, p.content, p.began) for p in pieces] == [
        ("hm", "", False), (" ok", "", False), ("", "The answer", True)]


def test_reasoning_then_a_held_tool_call():
    decoder = Decoder(_auto(), get_reasoning_parser("deepseek_r1"))
    pieces = _feed(decoder, ["let me look</think>", CALL])
    assert pieces[0].reasoning == "let me look" and pieces[0].content == ""
    assert pieces[1].began and pieces[1].content == ""
    assert [c.name for c in pieces[1].calls] == ["get_weather"]


def test_json_answers_have_no_reasoning_to_split():
    parser = get_reasoning_parser("deepseek_r1")
    assert Decoder.of(_auto(), parser, json_answer=False).reasoning is parser
    assert Decoder.of(_auto(), parser, json_answer=True).reasoning is None
    forced = ToolUse("required", get_parser("hermes"), constraint={"json": {}})
    assert Decoder.of(forced, parser, json_answer=False).reasoning is None


def test_a_stream_that_ends_without_a_finish_gives_what_it_held():
    choice = Decoder(_auto(), get_reasoning_parser("deepseek_r1")).choice(0)
    assert choice.feed("hm</think><to").content == ""
    end = choice.end("stop")
    assert end.content == "<to" and end.finish == "stop"
    assert choice.end("stop").content == ""  # once only


def test_a_whole_answer_finds_calls_after_content():
    decoder = Decoder(_auto(), get_reasoning_parser("deepseek_r1"))
    whole = decoder.whole(0, "hm</think>Sure. " + CALL, "stop")
    assert whole.reasoning == "hm" and whole.content == "Sure."
    assert [c.name for c in whole.calls] == ["get_weather"] and whole.finish == "tool_calls"
    # Streamed, "Sure." cannot open a call, so it is sent, and the rest with it.
    pieces = _feed(decoder, ["hm</think>Sure. ", CALL])
    assert "".join(p.content for p in pieces) == "Sure. " + CALL

"""POST /v1/responses on the real stack, through the official `openai` client.

The tiny model writes random text: these tests check the structure, token counts, event
order and what the engine enforces (schemas), never the words.
"""

from __future__ import annotations

import json
import re
import time

import jsonschema
import openai
import pytest

from .conftest import MODEL
from .test_openai_api import _error, _settled

# The frontend started with --reasoning-parser qwen3 (and hermes tool calls), and the
# regular expression that forces "<think>reasoning</think>answer" out of the tiny model.
from .test_openai_breadth import THINKING, _forced, parsers  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

INSTRUCTIONS = "You are a helpful assistant."
QUESTION = "What is the weather like today?"
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
TEXT_ITEM = ["response.output_item.added", "response.content_part.added"]
TEXT_DONE = ["response.output_text.done", "response.content_part.done",
             "response.output_item.done"]
REASONING_ITEM = ["response.output_item.added", "response.content_part.added"]
REASONING_DONE = ["response.reasoning_text.done", "response.content_part.done",
                  "response.output_item.done"]
WORDS = "[a-z ]{1,16}"  # what THINKING allows inside and after <think>...</think>


def test_responses_text_matches_chat_and_counts_tokens(oai, tokenizer):
    r = oai.responses.create(model=MODEL, instructions=INSTRUCTIONS, input=QUESTION,
                             max_output_tokens=8, temperature=0)
    assert r.object == "response" and r.model == MODEL
    assert r.status in ("completed", "incomplete")
    [item] = r.output
    assert item.type == "message" and item.role == "assistant"
    assert [p.type for p in item.content] == ["output_text"]
    # The same conversation through chat completions: the same prompt, the same tokens.
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": QUESTION}]
    chat = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8,
                                       temperature=0)
    assert r.output_text == chat.choices[0].message.content
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert r.usage.input_tokens == len(tokenizer.encode(text, add_special_tokens=False))
    assert r.usage.output_tokens == chat.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    if r.usage.output_tokens == 8:
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"


def test_responses_stream_events_in_order(oai):
    full = oai.responses.create(model=MODEL, input=QUESTION, max_output_tokens=8, temperature=0)
    events = list(oai.responses.create(model=MODEL, input=QUESTION, max_output_tokens=8,
                                       temperature=0, stream=True))
    kinds = [e.type for e in events]
    deltas = kinds.count("response.output_text.delta")
    assert deltas >= 1
    assert kinds == ["response.created", "response.in_progress", *TEXT_ITEM,
                     *["response.output_text.delta"] * deltas, *TEXT_DONE,
                     f"response.{full.status}"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == events[-4].text == events[-1].response.output_text == full.output_text
    assert events[-1].response.usage.output_tokens == full.usage.output_tokens
    # Stored: GET returns the final object.
    got = oai.responses.retrieve(events[0].response.id)
    assert got.status == full.status and got.output_text == text


def test_responses_json_schema_is_enforced(oai):
    r = oai.responses.create(model=MODEL, input=QUESTION, max_output_tokens=100,
                             temperature=1.0, text={"format": {
                                 "type": "json_schema", "name": "weather", "schema": WEATHER,
                                 "strict": True}})
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), WEATHER)


def test_responses_function_call_then_its_output(oai):
    r = oai.responses.create(model=MODEL, input=QUESTION, tools=TOOLS, max_output_tokens=100,
                             tool_choice={"type": "function", "name": "get_weather"})
    [call] = r.output
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id
    jsonschema.validate(json.loads(call.arguments), WEATHER)
    # The next turn: the stored conversation, the call and its result make the prompt.
    nxt = oai.responses.create(model=MODEL, previous_response_id=r.id, tools=TOOLS,
                               temperature=0, max_output_tokens=4, input=[{
                                   "type": "function_call_output", "call_id": call.call_id,
                                   "output": json.dumps({"temperature": 21})}])
    assert nxt.previous_response_id == r.id and nxt.output[0].type == "message"
    # Tools, question, call and result: more than the first turn's prompt and answer.
    assert nxt.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens
    assert oai.responses.retrieve(r.id).output[0].arguments == call.arguments


def test_responses_cancel_stops_generation(oai, http):
    http.post("/v1/responses", json={"model": MODEL, "input": "hi", "max_output_tokens": 1})
    before = _settled(http, "vllm:generation_tokens_total", model=MODEL)
    r = oai.responses.create(model=MODEL, input=QUESTION, background=True,
                             max_output_tokens=900, temperature=1.0)
    assert r.status in ("queued", "in_progress") and r.background
    deadline = time.monotonic() + 60
    while not oai.responses.retrieve(r.id).output:
        assert time.monotonic() < deadline, "the background response never started"
        time.sleep(0.02)
    cancelled = oai.responses.cancel(r.id)
    assert cancelled.status == "cancelled"
    assert oai.responses.retrieve(r.id).status == "cancelled"
    generated = _settled(http, "vllm:generation_tokens_total", model=MODEL) - before
    assert 0 < generated < 900, "the engine generated on after the cancel"


def test_responses_reject_what_they_do_not_support(oai, http):
    for extra, param in (({"tools": [{"type": "web_search"}]}, "tools[0].type"),
                         ({"reasoning": {"effort": "high"}}, "reasoning"),
                         ({"include": ["message.output_text.logprobs"]}, "include"),
                         ({"background": True, "store": False}, "background")):
        err = _error(http.post("/v1/responses", json={"model": MODEL, "input": "x", **extra}),
                     400)
        assert err["param"] == param, err
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve("resp-unknown")


def test_responses_reasoning_item_then_message(parsers):  # noqa: F811 (a fixture)
    body = {"model": MODEL, "input": QUESTION, "max_output_tokens": 120, "temperature": 0,
            "extra_body": _forced(THINKING)}
    r = parsers.responses.create(**body)
    assert r.status == "completed"
    assert [item.type for item in r.output] == ["reasoning", "message"]
    reasoning, message = r.output
    assert reasoning.id.startswith("rs_") and reasoning.status == "completed"
    assert reasoning.summary == [] and reasoning.encrypted_content is None
    [part] = reasoning.content
    assert part.type == "reasoning_text" and re.fullmatch(WORDS, part.text)
    assert [p.type for p in message.content] == ["output_text"]
    assert re.fullmatch(WORDS, r.output_text)
    # The same split as chat completions gives for the same greedy generation.
    chat = parsers.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}], max_tokens=120,
        temperature=0, extra_body=_forced(THINKING)).choices[0].message
    assert (part.text, r.output_text) == (chat.reasoning, chat.content)

    events = list(parsers.responses.create(stream=True, **body))
    kinds = [e.type for e in events]
    thinking = kinds.count("response.reasoning_text.delta")
    answering = kinds.count("response.output_text.delta")
    assert thinking >= 1 and answering >= 1
    assert kinds == ["response.created", "response.in_progress",
                     *REASONING_ITEM, *["response.reasoning_text.delta"] * thinking,
                     *REASONING_DONE,
                     *TEXT_ITEM, *["response.output_text.delta"] * answering, *TEXT_DONE,
                     "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = events[2]
    assert added.output_index == 0 and added.item.type == "reasoning"
    assert events[3].part.type == "reasoning_text" and events[3].part.text == ""
    rs_events = events[3:7 + thinking]  # content_part.added .. output_item.done
    assert {(e.item_id if hasattr(e, "item_id") else e.item.id) for e in rs_events} == \
        {added.item.id}
    assert {e.output_index for e in rs_events} == {0}
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    text_done, part_done, item_done = events[4 + thinking:7 + thinking]
    assert thought == text_done.text == part_done.part.text == part.text
    assert item_done.item.status == "completed"
    assert item_done.item.content[0].text == part.text
    msg_events = events[7 + thinking:-1]
    assert msg_events[0].item.type == "message"
    assert {e.output_index for e in msg_events} == {1}
    answer = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert answer == events[-2].item.content[0].text == r.output_text
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == part.text and final.output_text == answer

    # Sent back as input items, the reasoning and the answer make the next turn's prompt.
    nxt = parsers.responses.create(model=MODEL, max_output_tokens=2, temperature=0, input=[
        {"role": "user", "content": QUESTION},
        reasoning.model_dump(exclude_none=True), message.model_dump(exclude_none=True),
        {"role": "user", "content": "And tomorrow?"}])
    assert nxt.status in ("completed", "incomplete")
    # The same conversation through previous_response_id.
    cont = parsers.responses.create(model=MODEL, max_output_tokens=2, temperature=0,
                                    previous_response_id=r.id, input="And tomorrow?")
    assert cont.usage.input_tokens == nxt.usage.input_tokens

"""/v1/responses: request mapping, events, the store, previous_response_id, cancel, 400s."""

import json
import time

import pytest
from openai_fakes import FakeTriton

from qa.common.sse import events_of, iter_events
from triton_openai import FrontendConfig

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]

TEXT_EVENTS = ["response.output_item.added", "response.content_part.added"]
TEXT_DONE = ["response.output_text.done", "response.content_part.done",
             "response.output_item.done"]
CALL_DONE = ["response.function_call_arguments.done", "response.output_item.done"]


def _events(resp):
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = []
    for sse_event in events_of(resp.text):
        event = sse_event.json()
        assert sse_event.event == event["type"]
        events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def _sampling(triton):
    return json.loads(triton.requests[-1]["sampling_parameters"][0])


def _prompt(triton):
    # The fake tokenizer's ids are word lengths: compare the prompt's shape through them.
    return triton.requests[-1]["input_ids"]


def test_text_input_instructions_and_usage(client, triton):
    r = client.post("/v1/responses", json={
        "model": "llm", "input": "hello there", "instructions": "be brief",
        "max_output_tokens": 3, "temperature": 0.5, "top_p": 0.9, "top_k": 4})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "response" and body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    [item] = body["output"]
    assert item["type"] == "message" and item["role"] == "assistant"
    assert item["content"] == [{"type": "output_text", "text": " w0 w1 w2", "annotations": [],
                                "logprobs": []}]
    assert _sampling(triton) == {"n": 1, "temperature": 0.5, "top_p": 0.9, "top_k": 4,
                                 "max_tokens": 3}
    # <|system|>be brief <|user|>hello there <|assistant|>
    assert _prompt(triton) == [len("<|system|>be"), len("brief"), len("<|user|>hello"),
                               len("there"), len("<|assistant|>")]
    assert body["usage"] == {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0},
                             "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0},
                             "total_tokens": 8}


def test_completed_when_the_model_stops(make_client):
    c = make_client(fake=FakeTriton(script=[" a", " b"]))
    body = c.post("/v1/responses", json={"model": "llm", "input": "x"}).json()
    assert body["status"] == "completed" and body["incomplete_details"] is None
    assert body["output"][0]["status"] == "completed"
    assert body["usage"]["output_tokens"] == 2


def test_message_inputs(client, triton):
    client.post("/v1/responses", json={"model": "llm", "max_output_tokens": 1, "input": [
        {"role": "developer", "content": "sys"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q1"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "a1"}]},
        {"role": "user", "content": "q2"}]})
    assert _prompt(triton) == [len(w) for w in
                               "<|system|>sys <|user|>q1 <|assistant|>a1 <|user|>q2 "
                               "<|assistant|>".split()]


def test_stream_event_order(client):
    events = _events(client.post("/v1/responses", json={
        "model": "llm", "input": "hi", "max_output_tokens": 3, "stream": True}))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", *TEXT_EVENTS,
        *["response.output_text.delta"] * 3, *TEXT_DONE, "response.incomplete"]
    assert events[0]["response"]["status"] == "in_progress"
    item_id = events[2]["item"]["id"]
    assert {e.get("item_id") for e in events[3:-2]} == {item_id}
    assert "".join(e["delta"] for e in events if "delta" in e) == events[-4]["text"] == " w0 w1 w2"
    final = events[-1]["response"]
    assert final["usage"]["output_tokens"] == 3
    assert final["output"][0]["content"][0]["text"] == " w0 w1 w2"


def test_stream_ends_with_completed(make_client):
    c = make_client(fake=FakeTriton(script=[" a"]))
    events = _events(c.post("/v1/responses", json={"model": "llm", "input": "x", "stream": True}))
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["status"] == "completed"


def test_json_schema_format(client, triton):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = client.post("/v1/responses", json={
        "model": "llm", "input": "x", "max_output_tokens": 2,
        "text": {"format": {"type": "json_schema", "name": "thing", "schema": schema,
                            "strict": True}}}).json()
    assert _sampling(triton)["structured_outputs"] == {"json": schema}
    assert body["text"]["format"]["schema"] == schema
    client.post("/v1/responses", json={"model": "llm", "input": "x", "max_output_tokens": 2,
                                       "text": {"format": {"type": "json_object"}}})
    assert _sampling(triton)["structured_outputs"] == {"json_object": True}


def test_auto_tool_call_becomes_function_call_item(make_client, triton):
    c = make_client(fake=FakeTriton(script=['{"name": "get_weather", ', '"parameters": ',
                                            '{"city": "Paris"}}']))
    body = c.post("/v1/responses", json={"model": "llm", "input": "weather?",
                                         "tools": TOOLS}).json()
    [call] = body["output"]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert call["call_id"].startswith("call_") and call["id"].startswith("fc_")

    events = _events(c.post("/v1/responses", json={"model": "llm", "input": "weather?",
                                                   "tools": TOOLS, "stream": True}))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", *CALL_DONE, "response.completed"]
    assert events[2]["item"]["arguments"] == ""
    assert json.loads(events[4]["arguments"]) == {"city": "Paris"}
    assert events[4]["name"] == "get_weather"


def test_named_tool_choice_streams_arguments(make_client):
    fake = FakeTriton(script=['{"city"', ': "Paris"}'])
    c = make_client(fake=fake)
    events = _events(c.post("/v1/responses", json={
        "model": "llm", "input": "x", "tools": TOOLS, "stream": True,
        "tool_choice": {"type": "function", "name": "get_weather"}}))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        *["response.function_call_arguments.delta"] * 2, *CALL_DONE, "response.completed"]
    sp = json.loads(fake.requests[-1]["sampling_parameters"][0])
    assert sp["structured_outputs"] == {"json": TOOLS[0]["parameters"]}
    assert events[-1]["response"]["output"][0]["arguments"] == '{"city": "Paris"}'


def test_function_call_output_feeds_the_next_turn(client, triton):
    client.post("/v1/responses", json={"model": "llm", "max_output_tokens": 1, "tools": TOOLS,
                                       "input": [
        {"role": "user", "content": "w?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]})
    ids = _prompt(triton)
    assert len("<|tool|>sunny") in ids  # the tool's answer is in the prompt


def test_store_retrieve_and_store_false(client):
    body = client.post("/v1/responses", json={"model": "llm", "input": "x",
                                              "max_output_tokens": 2}).json()
    assert client.get(f"/v1/responses/{body['id']}").json() == body
    gone = client.post("/v1/responses", json={"model": "llm", "input": "x", "store": False,
                                              "max_output_tokens": 2}).json()
    r = client.get(f"/v1/responses/{gone['id']}")
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"


def test_store_evicts_least_recently_used(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, responses_store_size=2))
    ids = [c.post("/v1/responses", json={"model": "llm", "input": "x",
                                         "max_output_tokens": 1}).json()["id"] for _ in range(2)]
    assert c.get(f"/v1/responses/{ids[0]}").status_code == 200  # now the most recent
    ids.append(c.post("/v1/responses", json={"model": "llm", "input": "x",
                                             "max_output_tokens": 1}).json()["id"])
    assert [c.get(f"/v1/responses/{i}").status_code for i in ids] == [200, 404, 200]


def test_previous_response_id_continues_the_conversation(client, triton):
    first = client.post("/v1/responses", json={"model": "llm", "input": "q1",
                                               "instructions": "sys", "max_output_tokens": 2})
    client.post("/v1/responses", json={"model": "llm", "input": "q2", "max_output_tokens": 1,
                                       "previous_response_id": first.json()["id"]})
    # Instructions are not carried over; the earlier input and output are.
    assert _prompt(triton) == [len(w) for w in
                               "<|user|>q1 <|assistant|> w0 w1 <|user|>q2 <|assistant|>".split()]
    r = client.post("/v1/responses", json={"model": "llm", "input": "q",
                                           "previous_response_id": "resp-nope"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "previous_response_id"


def test_previous_function_call_is_replayed(make_client):
    fake = FakeTriton(script=['{"name": "get_weather", "parameters": {"city": "Oslo"}}'])
    c = make_client(fake=fake)
    first = c.post("/v1/responses", json={"model": "llm", "input": "w?", "tools": TOOLS}).json()
    call = first["output"][0]
    c.post("/v1/responses", json={
        "model": "llm", "tools": TOOLS, "previous_response_id": first["id"],
        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "rain"}]})
    assert len("<|tool|>rain") in fake.requests[-1]["input_ids"]


def test_cancel_background_response(make_client):
    fake = FakeTriton(delay=0.05)
    c = make_client(fake=fake)
    body = c.post("/v1/responses", json={"model": "llm", "input": "x", "background": True,
                                         "max_output_tokens": 50}).json()
    assert body["status"] == "queued" and body["background"] is True
    deadline = time.monotonic() + 5
    while not c.get(f"/v1/responses/{body['id']}").json()["output"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    cancelled = c.post(f"/v1/responses/{body['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert fake.cancelled == 1
    assert 0 < cancelled["usage"]["output_tokens"] < 50
    assert c.get(f"/v1/responses/{body['id']}").json()["status"] == "cancelled"
    # Cancelling again changes nothing.
    assert c.post(f"/v1/responses/{body['id']}/cancel").json()["status"] == "cancelled"
    assert c.post("/v1/responses/resp-nope/cancel").status_code == 404


def test_background_runs_to_completion(make_client):
    c = make_client(fake=FakeTriton(script=[" a", " b"]))
    rid = c.post("/v1/responses", json={"model": "llm", "input": "x",
                                        "background": True}).json()["id"]
    deadline = time.monotonic() + 5
    while (body := c.get(f"/v1/responses/{rid}").json())["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert body["output"][0]["content"][0]["text"] == " a b"


@pytest.mark.parametrize("extra, param", [
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"include": ["reasoning.encrypted_content"]}, "include"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"background": True, "store": False}, "background"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"truncation": "auto"}, "truncation"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"text": {"verbosity": "low"}}, "text.verbosity"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"tool_choice": {"type": "web_search_preview"}, "tools": TOOLS}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "input[0].type"),
    ({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]},
     "input[0].encrypted_content"),
    ({"input": [{"type": "reasoning", "summary": [], "content": [{"type": "input_text"}]}]},
     "input[0].content[0]"),
    ({"reasoning": {"summary": "auto"}}, "reasoning"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs"),
    ({"structured_outputs": {"regex": "a"}, "text": {"format": {"type": "json_object"}}},
     "structured_outputs"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]},
     "input[0].content[0].type"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
])
def test_unsupported_fields_are_named_in_a_400(client, triton, extra, param):
    r = client.post("/v1/responses", json={"model": "llm", "input": "x", **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert not triton.requests


def test_unknown_model_is_404(client):
    r = client.post("/v1/responses", json={"model": "nope", "input": "x"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_cancel_streamed_response(make_client):
    fake = FakeTriton(delay=0.05)
    c = make_client(fake=fake)
    with c.stream("POST", "/v1/responses", json={"model": "llm", "input": "x", "stream": True,
                                                  "max_output_tokens": 50}) as r:
        data = (event.json() for event in iter_events(r))
        rid = next(data)["response"]["id"]
        assert next(e for e in data if e["type"] == "response.output_text.delta")
        cancelled = c.post(f"/v1/responses/{rid}/cancel").json()
        rest = [e["type"] for e in data]
    assert cancelled["status"] == "cancelled" and fake.cancelled == 1
    assert 0 < cancelled["usage"]["output_tokens"] < 50
    # The stream ends without a completed or incomplete event.
    assert set(rest) <= {"response.output_text.delta"}


def test_streaming_client_gone_stops_generation(make_client):
    fake = FakeTriton(delay=0.05)
    c = make_client(fake=fake)
    with c.stream("POST", "/v1/responses", json={"model": "llm", "input": "x", "stream": True,
                                                  "max_output_tokens": 50}) as r:
        next(e for e in iter_events(r) if e.event == "response.output_text.delta")
    deadline = time.monotonic() + 5
    while fake.cancelled == 0:
        assert time.monotonic() < deadline, "the generation went on for nobody"
        time.sleep(0.01)


# --- reasoning ----------------------------------------------------------------------------

THINKING = ["<think>", "I should", " greet.", "</th", "ink>", "Hello", "!"]
REASONING_DONE = ["response.reasoning_text.done", "response.content_part.done",
                  "response.output_item.done"]


def _reasoning_client(make_client, script=THINKING, **config):
    fake = FakeTriton(script=script)
    config = FrontendConfig(triton_metrics_url=None, reasoning_parser="deepseek_r1", **config)
    return make_client(config, fake=fake), fake


def test_reasoning_item_then_message(make_client):
    c, _ = _reasoning_client(make_client)
    body = c.post("/v1/responses", json={"model": "llm", "input": "hi"}).json()
    reasoning, message = body["output"]
    assert reasoning["id"].startswith("rs_") and message["id"].startswith("msg_")
    assert {k: v for k, v in reasoning.items() if k != "id"} == {
        "type": "reasoning", "status": "completed", "summary": [],
        "content": [{"type": "reasoning_text", "text": "I should greet."}]}
    assert message["content"][0]["text"] == "Hello!"
    assert body["usage"]["output_tokens_details"] == {"reasoning_tokens": 0}


def test_reasoning_stream_event_order(make_client):
    c, _ = _reasoning_client(make_client)
    events = _events(c.post("/v1/responses", json={"model": "llm", "input": "hi",
                                                   "stream": True}))
    kinds = [e["type"] for e in events]
    # The tag split over "</th" + "ink>" is held back, then dropped: two reasoning deltas.
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        *["response.reasoning_text.delta"] * 2, *REASONING_DONE,
        *TEXT_EVENTS, *["response.output_text.delta"] * 2, *TEXT_DONE, "response.completed"]
    added, part = events[2], events[3]
    assert added["output_index"] == 0
    assert added["item"] == {"id": added["item"]["id"], "type": "reasoning",
                             "status": "in_progress", "summary": [], "content": []}
    assert part["part"] == {"type": "reasoning_text", "text": ""}
    rs_id = added["item"]["id"]
    deltas = [e for e in events if e["type"] == "response.reasoning_text.delta"]
    assert [(e["item_id"], e["output_index"], e["content_index"]) for e in deltas] == \
        [(rs_id, 0, 0)] * 2
    assert "".join(e["delta"] for e in deltas) == "I should greet."
    done, part_done, item_done = events[6:9]
    assert (done["item_id"], done["output_index"], done["content_index"], done["text"]) == \
        (rs_id, 0, 0, "I should greet.")
    assert part_done["part"] == {"type": "reasoning_text", "text": "I should greet."}
    assert item_done["item"]["status"] == "completed"
    assert item_done["item"]["content"] == [part_done["part"]]
    msg_added = events[9]
    assert msg_added["output_index"] == 1 and msg_added["item"]["type"] == "message"
    text = [e for e in events if e["type"] == "response.output_text.delta"]
    assert {e["output_index"] for e in text} == {1}
    assert "".join(e["delta"] for e in text) == "Hello!"
    final = events[-1]["response"]["output"]
    assert [i["type"] for i in final] == ["reasoning", "message"]
    assert final[0]["content"][0]["text"] == "I should greet."


@pytest.mark.parametrize("script", [
    ["<thi", "nk>I sh", "ould</", "think>Hel", "lo"],
    ["<think>I should</think>Hello"],
    ["<", "t", "h", "i", "n", "k", ">", "I should", "<", "/", "think", ">", "Hello"],
])
def test_reasoning_split_across_chunks(make_client, script):
    c, _ = _reasoning_client(make_client, script=script)
    body = {"model": "llm", "input": "hi"}
    full = c.post("/v1/responses", json=body).json()["output"]
    assert [i["content"][0]["text"] for i in full] == ["I should", "Hello"]
    events = _events(c.post("/v1/responses", json=dict(body, stream=True)))
    assert "".join(e["delta"] for e in events
                   if e["type"] == "response.reasoning_text.delta") == "I should"
    assert "".join(e["delta"] for e in events
                   if e["type"] == "response.output_text.delta") == "Hello"


def test_reasoning_cut_short_by_the_budget(make_client):
    c, _ = _reasoning_client(make_client, script=["<think>", "still", " going"])
    body = c.post("/v1/responses", json={"model": "llm", "input": "hi",
                                         "max_output_tokens": 2}).json()
    assert body["status"] == "incomplete"
    [reasoning] = body["output"]  # no empty message after reasoning that never ended
    assert reasoning["status"] == "incomplete"
    assert reasoning["content"][0]["text"] == "still"


def test_no_reasoning_split_under_a_json_format(make_client):
    c, _ = _reasoning_client(make_client, script=["<think>", "x", "</think>", "{}"])
    body = c.post("/v1/responses", json={
        "model": "llm", "input": "hi",
        "text": {"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}},
    }).json()
    [message] = body["output"]
    assert message["content"][0]["text"] == "<think>x</think>{}"


def test_no_reasoning_split_under_a_forced_tool_call(make_client):
    c, _ = _reasoning_client(make_client, script=["<think>", '{"city": "Paris"}'])
    body = c.post("/v1/responses", json={
        "model": "llm", "input": "hi", "tools": TOOLS,
        "tool_choice": {"type": "function", "name": "get_weather"}}).json()
    [call] = body["output"]
    assert call["type"] == "function_call" and call["arguments"] == '<think>{"city": "Paris"}'


def test_structured_outputs_extension(make_client):
    c, fake = _reasoning_client(make_client)
    c.post("/v1/responses", json={"model": "llm", "input": "hi",
                                  "structured_outputs": {"regex": "<think>[a-z]+</think>[a-z]+"}})
    assert _sampling(fake)["structured_outputs"] == {"regex": "<think>[a-z]+</think>[a-z]+"}


# Renders an assistant turn's reasoning, so that the prompt shows whether it arrived.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.reasoning %}<think>{{ m.reasoning }}</think> {% endif %}{{ m.content }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_previous_response_replays_its_reasoning(make_client):
    c, fake = _reasoning_client(make_client, chat_template=THINKING_TEMPLATE)
    first = c.post("/v1/responses", json={"model": "llm", "input": "q1"}).json()
    c.post("/v1/responses", json={"model": "llm", "input": "q2",
                                  "previous_response_id": first["id"]})
    words = "<|user|>q1 <|assistant|><think>I should greet.</think> Hello! <|user|>q2 " \
            "<|assistant|>"
    assert fake.requests[-1]["input_ids"] == [len(w) for w in words.split()]


def test_reasoning_input_items_are_accepted(make_client):
    c, fake = _reasoning_client(make_client, chat_template=THINKING_TEMPLATE)
    r = c.post("/v1/responses", json={"model": "llm", "input": [
        {"role": "user", "content": "q1"},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "hmm"}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "a1"}]},
        {"role": "user", "content": "q2"}]})
    assert r.status_code == 200, r.text
    words = "<|user|>q1 <|assistant|><think>hmm</think> a1 <|user|>q2 <|assistant|>"
    assert fake.requests[-1]["input_ids"] == [len(w) for w in words.split()]


def test_reasoning_items_map_to_assistant_turns():
    from triton_openai.responses_api.items import input_messages

    def thought(text):
        return {"type": "reasoning", "summary": [],
                "content": [{"type": "reasoning_text", "text": text}]}

    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    out = input_messages([thought("a"), call, {"type": "function_call_output",
                                               "call_id": "c1", "output": "r"},
                          thought("b")])
    assert [(m.role, m.reasoning, bool(m.tool_calls)) for m in out] == [
        ("assistant", "a", True), ("tool", None, False), ("assistant", "b", False)]


def _background(c, tokens=50):
    return c.post("/v1/responses", json={"model": "llm", "input": "x", "background": True,
                                         "max_output_tokens": tokens})


def _wait_until(condition, within=5.0):
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_background_responses_are_bounded_with_a_429(make_client):
    fake = FakeTriton(delay=0.05)
    c = make_client(FrontendConfig(triton_metrics_url=None, max_background_responses=2),
                    fake=fake)
    running = [_background(c).json()["id"] for _ in range(2)]
    refused = _background(c)
    assert refused.status_code == 429 and refused.headers["retry-after"]
    err = refused.json()["error"]
    assert (err["type"], err["param"], err["code"]) == (
        "rate_limit_error", "background", "too_many_background_responses")
    assert len(fake.requests) == 2
    # Neither foreground answers nor streams count; an ended background frees its place.
    assert c.post("/v1/responses", json={"model": "llm", "input": "x",
                                         "max_output_tokens": 1}).status_code == 200
    c.post(f"/v1/responses/{running[0]}/cancel")
    assert _background(c).status_code == 200


def test_the_shutdown_drain_waits_for_background_responses(make_client):
    c = make_client(fake=FakeTriton(delay=0.02))
    rid = _background(c, tokens=20).json()["id"]
    drain, store = c.app.state.drain, c.app.state.responses.store
    assert drain.in_flight == 1
    assert c.portal.call(drain.drain, 10.0) is True
    assert store.get(rid).response["status"] == "incomplete"  # ran to max_output_tokens
    assert drain.in_flight == 0


def test_the_shutdown_cuts_background_responses_after_its_grace_period(make_client):
    fake = FakeTriton(delay=0.05)
    c = make_client(fake=fake)
    rid = _background(c, tokens=50).json()["id"]
    drain, store = c.app.state.drain, c.app.state.responses.store
    assert c.portal.call(drain.drain, 0.2, 2.0) is False
    assert store.get(rid).response["status"] == "cancelled" and fake.cancelled == 1
    assert [cut for cut in drain.cut_requests if f"background {rid}" in cut]


def test_a_background_response_the_store_forgets_is_cancelled(make_client):
    fake = FakeTriton(delay=0.05)
    c = make_client(FrontendConfig(triton_metrics_url=None, responses_store_size=1),
                    fake=fake)
    first = _background(c).json()["id"]
    _wait_until(lambda: len(fake.requests) == 1)
    second = _background(c, tokens=2).json()["id"]  # pushes the first out of the store
    assert c.get(f"/v1/responses/{first}").status_code == 404
    _wait_until(lambda: fake.cancelled == 1)
    _wait_until(lambda: c.get(f"/v1/responses/{second}").json()["status"] == "incomplete")
    assert not c.app.state.responses.background

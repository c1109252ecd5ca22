"""/v1/chat/completions: tool-call streaming, parallel_tool_calls, reasoning, usage in
every chunk, compact JSON, OpenAI's ranges, served-name aliases."""

import json

import pytest
from openai_fakes import FakeTriton

from qa.common.sse import json_until_done
from triton_openai import FrontendConfig

MSG = [{"role": "user", "content": "hello there"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}]
TWO_CALLS = ['<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
             '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>']


def _sse(resp):
    assert resp.status_code == 200, resp.text
    return json_until_done(resp.text)


def _hermes(make_client, script, **config):
    fake = FakeTriton(script=script)
    return make_client(FrontendConfig(triton_metrics_url=None, tool_call_parser="hermes",
                                      **config), fake=fake), fake


def test_streamed_tool_calls_come_as_openai_sends_them(make_client):
    c, _ = _hermes(make_client, TWO_CALLS)
    events = _sse(c.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "tools": TOOLS, "stream": True}))
    deltas = [tc for e in events for tc in e["choices"][0]["delta"].get("tool_calls", [])]
    # Per call: index, id, type and name with empty arguments; then argument fragments.
    assert [set(d) for d in deltas] == [{"index", "id", "type", "function"}, {"index", "function"}] * 2
    assert [d["index"] for d in deltas] == [0, 0, 1, 1]
    assert deltas[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert json.loads(deltas[1]["function"]["arguments"]) == {"city": "Oslo"}
    assert deltas[0]["id"] != deltas[2]["id"]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_tool_calls_false_gives_one_call(make_client, stream):
    c, _ = _hermes(make_client, TWO_CALLS)
    body = {"model": "llm", "messages": MSG, "tools": TOOLS, "parallel_tool_calls": False,
            "stream": stream}
    r = c.post("/v1/chat/completions", json=body)
    if stream:
        calls = [tc for e in _sse(r) for tc in e["choices"][0]["delta"].get("tool_calls", [])
                 if "id" in tc]
    else:
        calls = r.json()["choices"][0]["message"]["tool_calls"]
    assert len(calls) == 1


def test_required_without_parallel_calls_is_constrained_to_one(make_client):
    fake = FakeTriton(script=['[{"name": "get_weather", "parameters": {"city": "Rome"}}]'])
    c = make_client(fake=fake)
    c.post("/v1/chat/completions", json={"model": "llm", "messages": MSG, "tools": TOOLS,
                                         "tool_choice": "required", "parallel_tool_calls": False})
    schema = json.loads(fake.requests[-1]["sampling_parameters"][0])["structured_outputs"]["json"]
    assert (schema["minItems"], schema["maxItems"]) == (1, 1)


@pytest.mark.parametrize("stream", [False, True])
def test_each_choice_has_its_own_call_id(make_client, stream):
    c = make_client(fake=FakeTriton(script=['{"city": "Paris"}']))
    body = {"model": "llm", "messages": MSG, "tools": TOOLS, "n": 3, "stream": stream,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    r = c.post("/v1/chat/completions", json=body)
    if stream:
        ids = [tc["id"] for e in _sse(r) for tc in e["choices"][0]["delta"].get("tool_calls", [])
               if "id" in tc]
    else:
        ids = [ch["message"]["tool_calls"][0]["id"] for ch in r.json()["choices"]]
    assert len(ids) == 3 and len(set(ids)) == 3


REASONING = ["<think>", "I should", " greet.", "</th", "ink>", "Hello", "!"]


def test_reasoning_is_split_off(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, reasoning_parser="deepseek_r1"),
                    fake=FakeTriton(script=REASONING))
    body = {"model": "llm", "messages": MSG}
    message = c.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    assert (message["reasoning"], message["content"]) == ("I should greet.", "Hello!")
    events = _sse(c.post("/v1/chat/completions", json=dict(body, stream=True)))
    deltas = [e["choices"][0]["delta"] for e in events]
    assert "".join(d.get("reasoning", "") for d in deltas) == "I should greet."
    assert "".join(d.get("content", "") for d in deltas) == "Hello!"
    # All of the reasoning comes before any of the answer.
    kinds = [k for d in deltas for k in ("reasoning", "content") if d.get(k)]
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")


def test_reasoning_sent_back_by_older_clients_reaches_the_template():
    from triton_openai.conversation.messages import ChatMessage
    from triton_openai.conversation.templating import messages_for_template

    old, new = messages_for_template([
        ChatMessage(role="assistant", content="a", reasoning_content="old"),
        ChatMessage(role="assistant", content="b", reasoning="new")])
    assert (old["reasoning"], old["reasoning_content"]) == ("old", "old")
    assert (new["reasoning"], new["reasoning_content"]) == ("new", "new")


def test_without_a_parser_there_is_no_reasoning_field(make_client):
    c = make_client(fake=FakeTriton(script=REASONING))
    message = c.post("/v1/chat/completions", json={"model": "llm", "messages": MSG}).json()
    assert "reasoning" not in message["choices"][0]["message"]


def test_usage_in_every_chunk(client):
    events = _sse(client.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "max_tokens": 3, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}))
    assert all("usage" in e for e in events)
    completion = [e["usage"]["completion_tokens"] for e in events]
    assert completion == sorted(completion) and completion[-1] == 3
    assert events[-1]["choices"] == []


def test_completions_usage_in_every_chunk(client):
    events = _sse(client.post("/v1/completions", json={
        "model": "llm", "prompt": "a b", "max_tokens": 2, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}))
    assert [e["usage"]["completion_tokens"] for e in events] == [1, 2, 2]


@pytest.mark.parametrize("path,body,param", [
    ("/v1/completions", {"prompt": "a", "logprobs": 6}, "logprobs"),
    ("/v1/chat/completions", {"messages": MSG, "logprobs": True, "top_logprobs": 21},
     "top_logprobs"),
    ("/v1/chat/completions", {"messages": MSG, "stream_options": {"include_usage": True}},
     "stream_options"),
    ("/v1/completions", {"prompt": "a", "stream": False,
                         "stream_options": {"include_usage": True}}, "stream_options"),
])
def test_openai_ranges_are_400(client, triton, path, body, param):
    r = client.post(path, json={"model": "llm", **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    assert triton.requests == []


SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}


@pytest.mark.parametrize("compact_server,request_options,expected", [
    (False, None, None),
    (False, {"disable_any_whitespace": True}, True),
    (True, None, True),
    (True, {"disable_any_whitespace": False}, False),
])
def test_compact_json(make_client, compact_server, request_options, expected):
    fake = FakeTriton(script=["{}"])
    c = make_client(FrontendConfig(triton_metrics_url=None, compact_json=compact_server),
                    fake=fake)
    body = {"model": "llm", "messages": MSG, "response_format": SCHEMA_FORMAT}
    if request_options is not None:
        body["structured_outputs"] = request_options
    assert c.post("/v1/chat/completions", json=body).status_code == 200
    sent = json.loads(fake.requests[-1]["sampling_parameters"][0])["structured_outputs"]
    assert sent["json"] == {"type": "object"}
    assert sent.get("disable_any_whitespace") == expected


def test_structured_outputs_cannot_add_a_second_constraint(client):
    r = client.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "response_format": SCHEMA_FORMAT,
        "structured_outputs": {"regex": "a+"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "structured_outputs"


def test_a_model_under_several_names(make_client, triton):
    c = make_client(FrontendConfig(triton_metrics_url=None,
                                   served_model_names={"llm": ["gpt-x", "x-latest"]}))
    ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
    assert {"gpt-x", "x-latest"} <= set(ids) and "llm" not in ids
    for name in ("gpt-x", "x-latest"):
        r = c.post("/v1/completions", json={"model": name, "prompt": "a", "max_tokens": 1})
        assert r.json()["model"] == name
        assert triton.requests[-1]["model"] == "llm"

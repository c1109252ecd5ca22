"""/v1/chat/completions: templating, tools, response formats, streaming."""

import json

from openai_fakes import (
    FakeTokenizers,
    FakeTriton,
    ThreadRecordingTokenizer,
    event_loop_thread,
)

from qa.common.sse import json_until_done

MSG = [{"role": "user", "content": "hello there"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}]


def _sse(resp):
    return json_until_done(resp.text)


def test_template_and_usage(client, triton):
    r = client.post("/v1/chat/completions", json={"model": "llm", "messages": MSG,
                                                  "max_completion_tokens": 3}).json()
    assert r["object"] == "chat.completion"
    assert r["choices"][0]["message"] == {"role": "assistant", "content": " w0 w1 w2"}
    assert r["choices"][0]["finish_reason"] == "length"
    prompt_ids = triton.requests[-1]["input_ids"]
    assert r["usage"]["prompt_tokens"] == len(prompt_ids)
    assert r["usage"]["completion_tokens"] == 3


def test_stream_equals_full_and_role_first(client):
    body = {"model": "llm", "messages": MSG, "max_tokens": 4, "n": 2}
    full = client.post("/v1/chat/completions", json=body).json()
    events = _sse(client.post("/v1/chat/completions", json=dict(body, stream=True)))
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    for i in range(2):
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events
                       if e["choices"][0]["index"] == i)
        assert text == full["choices"][i]["message"]["content"]


def test_response_format_json_schema(client, triton):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    client.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "max_tokens": 2,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    sp = json.loads(triton.requests[-1]["sampling_parameters"][0])
    assert sp["structured_outputs"] == {"json": schema}
    client.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "max_tokens": 2, "response_format": {"type": "json_object"}})
    assert json.loads(triton.requests[-1]["sampling_parameters"][0])["structured_outputs"] == {
        "json_object": True}


def test_named_tool_choice(make_client):
    fake = FakeTriton(script=['{"city"', ': "Paris"}'])
    c = make_client(fake=fake)
    body = {"model": "llm", "messages": MSG, "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    r = c.post("/v1/chat/completions", json=body).json()
    call = r["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert r["choices"][0]["finish_reason"] == "stop"
    sp = json.loads(fake.requests[-1]["sampling_parameters"][0])
    assert sp["structured_outputs"] == {"json": TOOLS[0]["function"]["parameters"]}
    events = _sse(c.post("/v1/chat/completions", json=dict(body, stream=True)))
    args = "".join(tc["function"].get("arguments", "") for e in events
                   for tc in e["choices"][0]["delta"].get("tool_calls", []))
    assert args == '{"city": "Paris"}'


def test_auto_tool_call_parsed(make_client):
    fake = FakeTriton(script=['{"name": "get_weather", ', '"parameters": {"city": "Oslo"}}'])
    c = make_client(fake=fake)
    body = {"model": "llm", "messages": MSG, "tools": TOOLS}
    r = c.post("/v1/chat/completions", json=body).json()
    assert r["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Oslo"}
    events = _sse(c.post("/v1/chat/completions", json=dict(body, stream=True)))
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert any("tool_calls" in e["choices"][0]["delta"] for e in events)


def test_auto_plain_text_streams_as_content(make_client):
    fake = FakeTriton(script=["Hi", " there"])
    c = make_client(fake=fake)
    events = _sse(c.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "tools": TOOLS, "stream": True}))
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events) == "Hi there"
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


def test_required_tool_choice(make_client):
    fake = FakeTriton(script=['[{"name": "get_weather", "parameters": {"city": "Rome"}}]'])
    c = make_client(fake=fake)
    r = c.post("/v1/chat/completions", json={"model": "llm", "messages": MSG, "tools": TOOLS,
                                             "tool_choice": "required"}).json()
    assert r["choices"][0]["finish_reason"] == "tool_calls"
    assert r["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_logprobs_layout(client):
    r = client.post("/v1/chat/completions", json={"model": "llm", "messages": MSG, "max_tokens": 1,
                                                  "logprobs": True, "top_logprobs": 2}).json()
    content = r["choices"][0]["logprobs"]["content"]
    assert content[0]["token"] == " w0" and content[0]["logprob"] == -0.5
    assert [t["token"] for t in content[0]["top_logprobs"]] == [" w0", "z"]


def test_unknown_named_tool_is_400(client):
    r = client.post("/v1/chat/completions", json={
        "model": "llm", "messages": MSG, "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"


def test_a_big_conversation_is_tokenized_off_the_event_loop(make_client):
    tok = ThreadRecordingTokenizer()
    c = make_client()
    c.app.state.completions.gen.tokenizers = FakeTokenizers(tok)
    loop_thread = [event_loop_thread(c)]
    for content, on_the_loop in (("a b", True), ("ab" * 5000, False)):
        tok.threads.clear()
        r = c.post("/v1/chat/completions", json={
            "model": "llm", "messages": [{"role": "user", "content": content}], "max_tokens": 1})
        assert r.status_code == 200, r.text
        assert (tok.threads == loop_thread) is on_the_loop, (tok.threads, loop_thread)

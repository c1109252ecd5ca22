"""The OpenAI API on the real stack, through the official `openai` client and raw HTTP."""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import time

import httpx
import jsonschema
import openai
import pytest

from qa.common.metrics import samples, series_total, settled

from .conftest import EMBED_MODEL, LORA, MAX_MODEL_LEN, MODEL

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PROMPTS = ["The quick brown fox", "The capital of France is"]
MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the weather like today?"}]
GREEDY = {"temperature": 0}


def _chat_prompt_tokens(tokenizer, messages, **kw) -> int:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kw)
    return len(tokenizer.encode(text, add_special_tokens=False))


def _error(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"]
    return body["error"]


# --- models --------------------------------------------------------------------------

def test_models(oai):
    ids = {m.id for m in oai.models.list().data}
    assert {MODEL, EMBED_MODEL} <= ids
    assert oai.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("no-such-model")


def test_lora_adapter_is_listed_with_its_parent(http):
    cards = {card["id"]: card for card in http.get("/v1/models").json()["data"]}
    adapter = f"{MODEL}:{LORA}"
    assert cards[adapter]["parent"] == MODEL
    assert cards[MODEL]["parent"] is None
    assert http.get(f"/v1/models/{adapter}").json()["parent"] == MODEL


@pytest.mark.grpc_transport
def test_lora_adapter_serves_requests(oai):
    adapter = f"{MODEL}:{LORA}"

    def text(model):
        return oai.completions.create(model=model, prompt=PROMPTS[0], max_tokens=12,
                                      extra_body={"ignore_eos": True}, **GREEDY).choices[0].text

    base, adapted = text(MODEL), text(adapter)
    assert adapted != base, "the adapter did not change the answer"
    assert text(adapter) == adapted
    chat = oai.chat.completions.create(model=adapter, messages=MESSAGES, max_tokens=4, **GREEDY)
    assert chat.model == adapter


# --- completions -----------------------------------------------------------------------

@pytest.mark.grpc_transport
@pytest.mark.parametrize("prompt", PROMPTS)
def test_completion_stream_equals_non_stream(oai, prompt):
    full = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=32, **GREEDY)
    parts, reasons = [], []
    for chunk in oai.completions.create(model=MODEL, prompt=prompt, max_tokens=32, stream=True,
                                        **GREEDY):
        parts.append(chunk.choices[0].text)
        reasons.append(chunk.choices[0].finish_reason)
    assert full.choices[0].text, "the model generated nothing"
    assert "".join(parts) == full.choices[0].text
    assert reasons[-1] == full.choices[0].finish_reason


@pytest.mark.grpc_transport
def test_completion_usage_equals_tokenizer(oai, tokenizer):
    prompt = PROMPTS[0]
    r = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=7, logprobs=0,
                               extra_body={"ignore_eos": True}, **GREEDY)
    assert r.usage.prompt_tokens == len(tokenizer.encode(prompt))
    assert r.usage.completion_tokens == 7 == len(r.choices[0].logprobs.tokens)
    assert r.usage.total_tokens == r.usage.prompt_tokens + 7
    # Streaming reports the same usage at the end.
    chunks = list(oai.completions.create(model=MODEL, prompt=prompt, max_tokens=7, stream=True,
                                         stream_options={"include_usage": True},
                                         extra_body={"ignore_eos": True}, **GREEDY))
    assert chunks[-1].choices == [] and chunks[-1].usage == r.usage


def test_completion_length_and_default_budget(oai, tokenizer):
    r = oai.completions.create(model=MODEL, prompt=PROMPTS[1], max_tokens=5,
                               extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    # Without max_tokens the answer may use the whole context: never a hidden 16.
    r = oai.completions.create(model=MODEL, prompt=PROMPTS[1], extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == MAX_MODEL_LEN - len(tokenizer.encode(PROMPTS[1]))


@pytest.mark.grpc_transport
def test_completion_list_prompts_and_n(oai):
    singles = [oai.completions.create(model=MODEL, prompt=p, max_tokens=12, **GREEDY)
               .choices[0].text for p in PROMPTS]
    r = oai.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=12, **GREEDY)
    assert [c.index for c in r.choices] == [0, 1]
    assert [c.text for c in r.choices] == singles
    r = oai.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=12, n=3,
                               temperature=1.0, seed=1, extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert all(c.text for c in r.choices)
    assert r.usage.completion_tokens == 36


def test_completion_echo_stop_seed(oai):
    prompt = PROMPTS[0]
    echo = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=8, echo=True, **GREEDY)
    plain = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=8, **GREEDY)
    assert echo.choices[0].text == prompt + plain.choices[0].text

    long = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=40,
                                  extra_body={"ignore_eos": True}, **GREEDY).choices[0].text
    stop = long[len(long) // 2:len(long) // 2 + 3]
    assert stop.strip(), long
    cut = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=40, stop=[stop],
                                 extra_body={"ignore_eos": True}, **GREEDY)
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == long[:long.index(stop)]

    a, b = (oai.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=1.0,
                                   seed=42).choices[0].text for _ in range(2))
    assert a == b


def test_unicode_line_breaks_in_text_leave_one_line_per_event(http):
    """JSON leaves U+0085, U+2028 and U+2029 raw in strings, and Python's splitlines (so
    httpx's iter_lines, which this test reads with as many clients do) ends lines at them."""
    prompt = "one\u2028two\x85three\u2029four"
    with http.stream("POST", "/v1/completions", json={
            "model": MODEL, "prompt": prompt, "max_tokens": 4, "echo": True, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]", lines
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks).startswith(prompt)


@pytest.mark.grpc_transport
def test_completion_logprobs(oai):
    r = oai.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=6, logprobs=3,
                               extra_body={"ignore_eos": True}, **GREEDY)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    # Byte-level tokens that end inside a character decode to U+FFFD on their own.
    assert "".join(lp.tokens).replace("\ufffd", "") == r.choices[0].text.replace("\ufffd", "")
    for lp_, top in zip(lp.token_logprobs, lp.top_logprobs, strict=True):
        # Alternatives that decode to the same text (partial UTF-8) share one key.
        assert lp_ <= 0 and 1 <= len(top) <= 4
        # Greedy: the chosen token is the most likely one.
        assert lp_ == pytest.approx(max(top.values()), abs=1e-4)


# --- chat --------------------------------------------------------------------------------

@pytest.mark.grpc_transport
def test_chat_stream_equals_non_stream_and_usage(oai, tokenizer):
    full = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=32, **GREEDY)
    msg = full.choices[0].message
    assert msg.role == "assistant" and msg.content
    assert full.usage.prompt_tokens == _chat_prompt_tokens(tokenizer, MESSAGES)
    stream = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=32,
                                         stream=True, stream_options={"include_usage": True},
                                         **GREEDY)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == msg.content
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [full.choices[0].finish_reason]
    assert chunks[-1].usage == full.usage


def test_chat_logprobs_count_equals_usage(oai):
    r = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_completion_tokens=9,
                                    logprobs=True, top_logprobs=2,
                                    extra_body={"ignore_eos": True}, **GREEDY)
    content = r.choices[0].logprobs.content
    assert r.choices[0].finish_reason == "length"
    assert len(content) == r.usage.completion_tokens == 9
    assert ("".join(t.token for t in content).replace("\ufffd", "")
            == r.choices[0].message.content.replace("\ufffd", ""))
    assert all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content)


@pytest.mark.grpc_transport
def test_chat_n3(oai):
    r = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10, n=3,
                                    temperature=1.0, seed=3, extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert r.usage.completion_tokens == 30
    stream = oai.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10, n=3,
                                         temperature=1.0, seed=3, stream=True,
                                         extra_body={"ignore_eos": True})
    texts = {0: "", 1: "", 2: ""}
    finished = set()
    for c in stream:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                finished.add(ch.index)
    assert finished == {0, 1, 2} and all(texts.values())


def test_chat_json_schema(oai):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Berlin", "Oslo"]},
                       "temperature": {"type": "integer", "minimum": -50, "maximum": 50},
                       "sunny": {"type": "boolean"}},
        "required": ["city", "temperature", "sunny"],
        "additionalProperties": False,
    }
    for seed in (1, 2, 3):
        r = oai.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=200, temperature=1.0, seed=seed,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "weather", "schema": schema}})
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_chat_named_tool_call(oai):
    params = {"type": "object",
              "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
                             "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
              "required": ["city", "unit"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}},
             {"type": "function", "function": {"name": "get_time", "parameters": {
                 "type": "object", "properties": {}}}}]
    choice = {"type": "function", "function": {"name": "get_weather"}}
    r = oai.chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools,
                                    tool_choice=choice, max_tokens=100, temperature=1.0, seed=5)
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_weather" and calls[0].id
    jsonschema.validate(json.loads(calls[0].function.arguments), params)
    # Streamed, the argument pieces add up to arguments that validate too.
    args, names = "", set()
    for c in oai.chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools,
                                         tool_choice=choice, max_tokens=100, temperature=1.0,
                                         seed=5, stream=True):
        for tc in c.choices[0].delta.tool_calls or []:
            if tc.function.name:
                names.add(tc.function.name)
            args += tc.function.arguments or ""
    assert names == {"get_weather"}
    jsonschema.validate(json.loads(args), params)


def test_chat_required_tool_call(oai):
    params = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo"]}},
              "required": ["city"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]
    r = oai.chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools,
                                    tool_choice="required", max_tokens=200, temperature=0)
    assert r.choices[0].finish_reason == "tool_calls"
    calls = r.choices[0].message.tool_calls
    assert calls, r.choices[0].message
    for call in calls:
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), params)


# --- embeddings ------------------------------------------------------------------------------

@pytest.mark.grpc_transport
def test_embeddings(oai, tokenizer):
    texts = ["The quick brown fox", "Inference servers batch requests"]
    r = oai.embeddings.create(model=EMBED_MODEL, input=texts)
    assert [d.index for d in r.data] == [0, 1]
    dims = len(r.data[0].embedding)
    assert dims == 128 and all(len(d.embedding) == dims for d in r.data)
    assert r.data[0].embedding != r.data[1].embedding
    assert r.usage.prompt_tokens == sum(len(tokenizer.encode(t)) for t in texts)
    single = oai.embeddings.create(model=EMBED_MODEL, input=texts[0]).data[0].embedding
    assert single == pytest.approx(r.data[0].embedding, abs=1e-5)
    ids = oai.embeddings.create(model=EMBED_MODEL, input=tokenizer.encode(texts[0])).data[0]
    assert ids.embedding == pytest.approx(single, abs=1e-5)


def test_embeddings_base64(http):
    body = {"model": EMBED_MODEL, "input": "hello"}
    floats = http.post("/v1/embeddings", json=body).json()["data"][0]["embedding"]
    b64 = http.post("/v1/embeddings", json=dict(body, encoding_format="base64")).json()
    raw = base64.b64decode(b64["data"][0]["embedding"])
    assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == pytest.approx(floats, abs=1e-6)


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.grpc_transport
def test_errors_have_openai_shape(http):
    chat = {"model": MODEL, "messages": MESSAGES, "max_tokens": 4}
    err = _error(http.post("/v1/chat/completions", json=dict(chat, temperature=7)), 400)
    assert err["param"] == "temperature" and err["type"] == "invalid_request_error"
    err = _error(http.post("/v1/chat/completions", json=dict(chat, model="nope")), 404)
    assert err["param"] == "model" and err["code"] == "model_not_found"
    err = _error(http.post("/v1/completions", json={"model": MODEL, "prompt": "hi",
                                                     "max_tokens": 5000}), 400)
    assert err["param"] == "max_tokens" and err["code"] == "context_length_exceeded"
    err = _error(http.post("/v1/chat/completions", json=dict(chat, messages=[])), 400)
    assert err["param"] == "messages"
    _error(http.post("/v1/completions", content=b"{oops", headers={
        "content-type": "application/json"}), 400)
    _error(http.post("/v1/embeddings", json={"model": MODEL, "input": "x"}), 400)
    _error(http.get("/v1/models/nope"), 404)
    # A sampling parameter the engine rejects comes back as 400, not 500.
    _error(http.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 4,
                                              "top_k": -7}), 400)
    # Also when streaming: the status comes before any event.
    _error(http.post("/v1/chat/completions", json=dict(chat, stream=True, top_k=-7)), 400)


def test_openai_client_raises_typed_errors(oai):
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, messages=MESSAGES, top_p=3)
    assert e.value.status_code == 400 and e.value.param == "top_p"
    with pytest.raises(openai.NotFoundError):
        oai.completions.create(model="nope", prompt="x")


# --- operation ---------------------------------------------------------------------------------

def test_health_and_metrics(http):
    assert http.get("/health/ready").status_code == 200
    assert http.get("/health/live").status_code == 200
    http.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 2})
    text = http.get("/metrics").text
    assert samples(text, "openai_frontend_requests_total", method="POST",
                   path="/v1/completions", status="200")
    assert samples(text, "nv_inference_request_success")  # Triton's own series
    assert samples(text, "vllm:generation_tokens_total")  # the backend's vLLM series


def _metric(http, name: str, **labels) -> float:
    """Sum of a series on /metrics (the frontend's page carries Triton's)."""
    return series_total(http.get("/metrics").text, name, **labels)


def _settled(http, name: str, **labels) -> float:
    return settled(lambda: _metric(http, name, **labels), name)


# The backend's log line when it stops a request whose client left, e.g.
# I1129 23:52:25.001175 12319 model.py:301] "[vllm] request cmpl-... aborted by its client"
_STOPPED_LINE = re.compile(r"^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*\[vllm\] request \S+ "
                           r"(?:aborted by its client|cancelled by the client)", re.MULTILINE)


def _seconds_of_day(t: float) -> float:
    tm = time.gmtime(t)
    return tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec + (t % 1)


@pytest.mark.host_mode
@pytest.mark.parametrize("stream", [True, False])
def test_disconnect_frees_engine_request(stack, http, stream):
    """A client that goes away mid-stream stops the generation in vLLM within a second.

    The backend logs when it stops a request (aborted by the frontend's abort request, or
    flagged as cancelled by Triton); vLLM's token counter shows that the generation
    stopped early.
    """
    if not hasattr(stack.triton, "logs"):
        pytest.skip("needs the server's log (a server started by the suite)")
    check_disconnect_stops_generation(stack.url, http, lambda: stack.triton.logs, stream)


def check_disconnect_stops_generation(url: str, http, logs, stream: bool) -> None:
    """A client of the frontend at `url` leaves; `logs()` reads the backend's log."""
    # 4 x 1000 tokens: seconds of work for the engine here, if nothing stops it.
    n = 4
    body = {"model": MODEL, "prompt": PROMPTS[0], "max_tokens": 1000, "n": n, "stream": stream,
            "ignore_eos": True}
    # Warm: the first request of a model loads its tokenizer in the frontend.
    http.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 1})
    tokens_before = _settled(http, "vllm:generation_tokens_total", model=MODEL)
    log_mark = len(logs())
    # A raw connection: the client leaves once the stream has begun (headers come with
    # the first token), or, for a complete answer, once the engine generates for it.
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        if stream:
            sock.settimeout(30)
            assert sock.recv(1), "no response"
        else:
            deadline = time.monotonic() + 30
            while _metric(http, "vllm:generation_tokens_total", model=MODEL) == tokens_before:
                assert time.monotonic() < deadline, "the request never reached the engine"
                time.sleep(0.05)
    gone = time.time()
    generated = _settled(http, "vllm:generation_tokens_total", model=MODEL) - tokens_before
    stopped = _STOPPED_LINE.search(logs()[log_mark:])
    assert stopped, "the backend never stopped the request"
    hours, minutes, seconds = stopped.groups()
    # Server log times are UTC, as this host's and the image's clocks.
    stopped_after = (int(hours) * 3600 + int(minutes) * 60 + float(seconds)
                     - _seconds_of_day(gone))
    if stopped_after < -43200:  # midnight came in between
        stopped_after += 86400
    print(f"stopped {stopped_after:.2f} s after the disconnect, {generated:.0f} of {n * 1000} "
          f"tokens generated")
    assert 0 < generated < n * 1000, "the request ran to its end"
    assert stopped_after < 1.0

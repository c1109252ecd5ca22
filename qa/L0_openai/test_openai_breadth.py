"""Request ids, limits, tokenizer endpoints, tools, reasoning and priority on the real
stack, through the official `openai` client and raw HTTP.  Assertions are about
structure, counts and conformance, never about what the random tiny model writes: where
a test needs text of a shape (a tool call, reasoning), structured outputs force it."""

from __future__ import annotations

import json
import re
import time
import uuid

import openai
import pytest

from .conftest import EMBED_MODEL, MODEL, triton_url
from .frontend_process import FrontendProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MESSAGES = [{"role": "user", "content": "What is the weather like today?"}]
ALIAS = "tiny-alias"
DEFAULT_MAX_TOKENS = 3  # the second frontend's generation config: max_new_tokens
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
# Hermes-shaped calls, forced by a regular expression: one call, or two.
CALL = r'<tool_call>\{"name": "get_weather", "arguments": \{"city": "[a-z]{1,6}"\}\}</tool_call>'
THINKING = r"<think>[a-z ]{1,16}</think>[a-z ]{1,16}"


def _wait_for(read, needle: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = read()
        if needle in text or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


@pytest.fixture(scope="module")
def parsers(stack, tmp_path_factory):
    """A second frontend: hermes tool calls, qwen3 reasoning (an answer that does not open
    with <think> is all content), an alias for the model,
    and sampling defaults from a generation_config.json of its own."""
    config = tmp_path_factory.mktemp("generation-config")
    (config / "generation_config.json").write_text(json.dumps(
        {"max_new_tokens": DEFAULT_MAX_TOKENS, "temperature": 0.0}))
    with FrontendProcess(triton_url(stack.triton), "--tool-call-parser", "hermes",
                         "--reasoning-parser", "qwen3",
                         "--served-model-name", f"{MODEL}={MODEL},{ALIAS}",
                         "--generation-config", str(config),
                         metrics_url=stack.triton.metrics_url) as fe:
        client = openai.OpenAI(base_url=f"{fe.url}/v1", api_key="unused", max_retries=0,
                               timeout=120)
        yield client
        client.close()


# --- request ids ------------------------------------------------------------------------

def test_request_id_is_echoed_and_leads_to_the_request_in_every_log(stack, oai):
    """The client's id is echoed and logged beside the request's internal id, which the
    Triton request and vLLM's log carry (and the answer's id): a client's id is never
    the engine's, so two requests that share one stay apart."""
    rid = f"trace-{uuid.uuid4().hex[:8]}"
    raw = oai.chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, max_tokens=2, extra_headers={"X-Request-Id": rid})
    assert raw.headers["x-request-id"] == rid
    internal = raw.parse().id.removeprefix("chatcmpl-")
    assert len(internal) == 32 and rid not in internal
    if hasattr(stack.triton, "logs"):
        # vLLM (enable_log_requests) logs the backend's id for it: the Triton id, then a suffix.
        logs = _wait_for(lambda: stack.triton.logs, internal)
        assert f"Added request {internal}-" in logs
    if stack.frontend is not None:
        log = _wait_for(lambda: stack.frontend.log, rid)
        assert f" {rid} {internal}" in log  # the access line names both
    made = oai.completions.with_raw_response.create(model=MODEL, prompt="x", max_tokens=1)
    assert len(made.headers["x-request-id"]) == 32
    assert made.parse().id == f"cmpl-{made.headers['x-request-id']}"


# --- defaults and limits ----------------------------------------------------------------

@pytest.mark.parametrize("kind,kwargs,param", [
    ("completions", {"prompt": "x", "logprobs": 6}, "logprobs"),
    ("chat", {"messages": MESSAGES, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat", {"messages": MESSAGES, "stream_options": {"include_usage": True}}, "stream_options"),
])
def test_openai_ranges_are_400(oai, kind, kwargs, param):
    create = oai.completions.create if kind == "completions" else oai.chat.completions.create
    with pytest.raises(openai.BadRequestError) as err:
        create(model=MODEL, max_tokens=1, **kwargs)
    assert err.value.body["param"] == param


def test_one_model_under_several_names(parsers):
    ids = {m.id for m in parsers.models.list().data}
    assert {MODEL, ALIAS} <= ids
    r = parsers.completions.create(model=ALIAS, prompt="Hello", max_tokens=2)
    assert r.model == ALIAS and r.usage.completion_tokens <= 2


def test_generation_config_sets_the_default_budget(parsers, oai):
    body = {"prompt": "Hello", "extra_body": {"ignore_eos": True}}
    assert parsers.completions.create(model=MODEL, **body).usage.completion_tokens == (
        DEFAULT_MAX_TOKENS)
    # Without it (the suite's frontend, a model without sampling defaults): all the context.
    assert oai.completions.create(model=MODEL, max_tokens=DEFAULT_MAX_TOKENS + 2, **body
                                  ).usage.completion_tokens == DEFAULT_MAX_TOKENS + 2


def test_compact_json_per_request(oai):
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0,
                                                     "maximum": 9},
                                               "b": {"type": "boolean"}},
              "required": ["a", "b"], "additionalProperties": False}
    r = oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=60, temperature=1.0, seed=3,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        extra_body={"structured_outputs": {"disable_any_whitespace": True}})
    text = r.choices[0].message.content
    assert json.loads(text).keys() == {"a", "b"}
    assert not re.search(r"\s", text)


# --- tokenizer endpoints and usage ------------------------------------------------------

def test_tokenize_and_detokenize(http, tokenizer, oai):
    r = http.post("/tokenize", json={"model": MODEL, "prompt": "The quick brown fox",
                                     "return_token_strs": True}).json()
    assert r["tokens"] == tokenizer.encode("The quick brown fox")
    assert r["count"] == len(r["tokens"]) == len(r["token_strs"]) and r["max_model_len"] > 0
    assert http.post("/detokenize", json={"model": MODEL, "tokens": r["tokens"]}).json()[
        "prompt"] == tokenizer.decode(r["tokens"])
    counted = http.post("/tokenize", json={"model": MODEL, "messages": MESSAGES}).json()["count"]
    assert counted == oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=1).usage.prompt_tokens
    assert http.post("/tokenize", json={"model": EMBED_MODEL, "prompt": "x"}).status_code == 200
    assert http.post("/detokenize", json={"model": MODEL, "tokens": [10**9]}).status_code == 400


def test_usage_in_every_chunk(oai):
    chunks = list(oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=6, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        extra_body={"ignore_eos": True}))
    assert all(c.usage is not None for c in chunks)
    counts = [c.usage.completion_tokens for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 6 and chunks[-1].choices == []
    assert {c.usage.prompt_tokens for c in chunks} == {chunks[-1].usage.prompt_tokens}


# --- tools ------------------------------------------------------------------------------

def _forced(pattern: str) -> dict:
    return {"structured_outputs": {"regex": pattern}}


@pytest.mark.parametrize("parallel,expected", [(True, 2), (False, 1)])
def test_hermes_calls_and_parallel_tool_calls(parsers, parallel, expected):
    r = parsers.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, max_tokens=300, parallel_tool_calls=parallel,
        extra_body=_forced(CALL + CALL))
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == expected
    for call in calls:
        assert call.function.name == "get_weather"
        assert re.fullmatch("[a-z]{1,6}", json.loads(call.function.arguments)["city"])


def test_streamed_tool_calls_come_as_openai_sends_them(parsers):
    deltas = []
    for chunk in parsers.chat.completions.create(
            model=MODEL, messages=MESSAGES, tools=TOOLS, max_tokens=300, stream=True,
            extra_body=_forced(CALL + CALL)):
        for ch in chunk.choices:
            deltas += ch.delta.tool_calls or []
    # Each call: its index, id and name (no arguments yet) first, then argument fragments.
    heads = [d for d in deltas if d.id]
    assert [d.index for d in heads] == [0, 1] and len({d.id for d in heads}) == 2
    assert all(d.function.name == "get_weather" and not d.function.arguments for d in heads)
    for index in (0, 1):
        args = "".join(d.function.arguments or "" for d in deltas if d.index == index)
        assert set(json.loads(args)) == {"city"}


def test_required_calls_without_parallel_calls_and_ids_per_choice(oai):
    r = oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, tool_choice="required", n=2,
        parallel_tool_calls=False, max_tokens=200, temperature=1.0, seed=7)
    calls = [call for ch in r.choices for call in ch.message.tool_calls]
    assert [len(ch.message.tool_calls) for ch in r.choices] == [1, 1]
    assert len({call.id for call in calls}) == 2


# --- reasoning --------------------------------------------------------------------------

def test_reasoning_is_split_off(parsers):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 120, "temperature": 0,
            "extra_body": _forced(THINKING)}
    message = parsers.chat.completions.create(**body).choices[0].message
    assert re.fullmatch("[a-z ]{1,16}", message.reasoning)
    assert re.fullmatch("[a-z ]{1,16}", message.content)
    reasoning = content = ""
    for chunk in parsers.chat.completions.create(stream=True, **body):
        for ch in chunk.choices:
            reasoning += getattr(ch.delta, "reasoning", None) or ""
            content += ch.delta.content or ""
    assert (reasoning, content) == (message.reasoning, message.content)


# --- priority ---------------------------------------------------------------------------

def test_priority_reaches_a_model_that_schedules_by_it(oai):
    r = oai.completions.create(model=MODEL, prompt="Hello", max_tokens=2,
                               extra_body={"priority": -1})
    assert r.usage.completion_tokens <= 2
    with pytest.raises(openai.BadRequestError):
        oai.completions.create(model=MODEL, prompt="Hello", max_tokens=2,
                               extra_body={"priority": "soon"})

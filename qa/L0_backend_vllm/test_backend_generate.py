"""Generation through Triton's HTTP and gRPC endpoints, on a real server and vLLM engine."""

from __future__ import annotations

import json
import math
import queue
import re
import time
import uuid
from contextlib import contextmanager

import httpx
import numpy as np
import pytest
from tokenizers import Tokenizer

from qa.common.metrics import metric_type, samples, series_total, settled
from qa.common.sse import aiter_events, iter_events

from .vllm_suite import (
    GREEDY,
    MODEL,
    PROMPTS,
    as_list,
    generate,
    generate_body,
    generate_stream,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def reference(offline):
    return offline.outputs()


def _json(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def test_auto_complete_fills_in_the_config(server):
    config = httpx.get(f"{server.http_url}/v2/models/{MODEL}/config").json()
    assert config["model_transaction_policy"]["decoupled"] is True
    assert config["max_batch_size"] == 0
    inputs = {i["name"]: i for i in config["input"]}
    outputs = {o["name"]: o for o in config["output"]}
    assert set(inputs) >= {"text_input", "input_ids", "stream", "sampling_parameters",
                           "exclude_input_in_output", "return_finish_reason",
                           "return_cumulative_logprob", "return_logprobs",
                           "return_num_input_tokens", "return_num_output_tokens"}
    assert inputs["input_ids"]["data_type"] == "TYPE_INT64"
    assert set(outputs) == {"text_output", "finish_reason", "cumulative_logprob", "logprobs",
                            "num_input_tokens", "num_output_tokens"}
    assert config["parameters"]["vllm_runner"]["string_value"] == "generate"
    assert config["parameters"]["vllm_max_model_len"]["string_value"] == "2048"


def test_greedy_generate_equals_offline_llm(server, reference):
    for prompt, expected in zip(PROMPTS, reference, strict=True):
        out = _json(generate(server, MODEL, prompt, GREEDY, exclude_input_in_output=True,
                             return_logprobs=True))
        token_ids = [e["token_id"] for e in json.loads(out["logprobs"])]
        assert token_ids == expected["token_ids"], prompt
        assert out["text_output"] == expected["text"], prompt


def test_request_parameters_are_sampling_parameters_without_the_input(server, reference):
    # The generate endpoint's `"parameters": {...}` (the form Triton's own examples use),
    # with numbers as strings, as perf tools send them.
    body = {"text_input": PROMPTS[0], "exclude_input_in_output": True,
            "return_num_output_tokens": True,
            "parameters": {"temperature": "0", "max_tokens": "16", "ignore_eos": True}}
    out = _json(httpx.post(f"{server.http_url}/v2/models/{MODEL}/generate", json=body,
                           timeout=120))
    assert out["text_output"] == reference[0]["text"]
    assert as_list(out["num_output_tokens"]) == [16]
    body["parameters"] = {"max_tokens": "many"}
    bad = httpx.post(f"{server.http_url}/v2/models/{MODEL}/generate", json=body, timeout=120)
    assert bad.status_code == 400 and "max_tokens" in bad.text, bad.text


def test_complete_answer_repeats_the_prompt_unless_excluded(server, reference):
    out = _json(generate(server, MODEL, PROMPTS[0], GREEDY))
    assert out["text_output"] == PROMPTS[0] + reference[0]["text"]


def test_stream_sends_only_new_text(server, reference):
    events = generate_stream(server, MODEL, PROMPTS[1], GREEDY, return_num_output_tokens=True,
                             return_finish_reason=True)
    assert all("error" not in e for e in events), events
    texts = [e["text_output"] for e in events]
    # One response per step (a few steps may be merged under load), each with only the
    # new tokens: their counts add up to max_tokens and their text to the whole answer.
    assert len(events) > 4
    assert sum(e["num_output_tokens"] for e in events) == GREEDY["max_tokens"]
    assert "".join(texts) == reference[1]["text"]
    assert [e["finish_reason"] for e in events[:-1]] == [""] * (len(events) - 1)
    assert events[-1]["finish_reason"] == "length"


def test_prompt_as_token_ids_equals_prompt_as_text(server, reference, tiny_model):
    ids = Tokenizer.from_file(str(tiny_model / "tokenizer.json")).encode(PROMPTS[2]).ids
    out = _json(generate(server, MODEL, None, GREEDY, input_ids=ids,
                         exclude_input_in_output=True, return_num_input_tokens=True))
    assert out["num_input_tokens"] == len(ids)
    assert out["text_output"] == reference[2]["text"]


def test_every_additional_output(server, tiny_model):
    tokenizer = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    sampling = {"temperature": 0, "max_tokens": "6", "logprobs": "3", "ignore_eos": "true"}
    out = _json(generate(server, MODEL, PROMPTS[3], sampling, exclude_input_in_output=True,
                         return_finish_reason=True, return_cumulative_logprob=True,
                         return_logprobs=True, return_num_input_tokens=True,
                         return_num_output_tokens=True))
    assert out["finish_reason"] == "length"
    assert out["num_input_tokens"] == len(tokenizer.encode(PROMPTS[3]).ids)
    assert out["num_output_tokens"] == 6
    entries = json.loads(out["logprobs"])
    assert len(entries) == 6
    for entry in entries:
        alternatives = entry["top_logprobs"]
        # Top-3 alternatives (plus the sampled token when it is not among them).
        assert 3 <= len(alternatives) <= 4
        # Greedy: the sampled token is the most likely one.
        best = max(alternatives, key=lambda a: a["logprob"])
        assert best["token_id"] == entry["token_id"]
        assert entry["logprob"] <= 0
        assert entry["token"] == tokenizer.decode([entry["token_id"]])
    assert math.isclose(out["cumulative_logprob"], sum(e["logprob"] for e in entries),
                        rel_tol=1e-4, abs_tol=1e-4)
    assert out["text_output"] == tokenizer.decode([e["token_id"] for e in entries])


def test_stop_token_finishes_with_stop(server, reference):
    first = reference[0]["token_ids"][0]
    out = _json(generate(server, MODEL, PROMPTS[0], {"temperature": 0, "max_tokens": 16,
                                                     "stop_token_ids": [first]},
                         return_finish_reason=True, return_num_output_tokens=True))
    assert out["finish_reason"] == "stop"
    assert out["num_output_tokens"] == 1


def test_n_choices_are_arrays_in_choice_order(server):
    sampling = {"n": 3, "temperature": 1.0, "seed": 7, "max_tokens": 5, "ignore_eos": True}
    out = _json(generate(server, MODEL, PROMPTS[0], sampling, exclude_input_in_output=True,
                         return_finish_reason=True, return_num_output_tokens=True,
                         return_cumulative_logprob=True, return_num_input_tokens=True))
    assert len(out["text_output"]) == 3
    assert out["finish_reason"] == ["length"] * 3
    assert out["num_output_tokens"] == [5] * 3
    assert len(out["cumulative_logprob"]) == 3
    assert not isinstance(out["num_input_tokens"], list)
    events = generate_stream(server, MODEL, PROMPTS[0], sampling, return_num_output_tokens=True)
    texts = ["".join(as_list(e["text_output"])[i] for e in events) for i in range(3)]
    # Seeded: the stream gives each choice the text the complete answer gave it.
    assert texts == out["text_output"]
    assert [sum(as_list(e["num_output_tokens"])[i] for e in events) for i in range(3)] == [5] * 3


def test_structured_outputs_constrain_the_random_model(server):
    out = _json(generate(server, MODEL, PROMPTS[0],
                         {"max_tokens": 10, "structured_outputs": {"choice": ["yes", "no"]}},
                         exclude_input_in_output=True))
    assert out["text_output"] in ("yes", "no")
    out = _json(generate(server, MODEL, PROMPTS[0],
                         {"max_tokens": 12, "structured_outputs": {"regex": "[0-9]{3}-[a-z]{2}"}},
                         exclude_input_in_output=True))
    assert re.fullmatch("[0-9]{3}-[a-z]{2}", out["text_output"])
    schema = {"type": "object", "properties": {"answer": {"type": "boolean"}},
              "required": ["answer"], "additionalProperties": False}
    out = _json(generate(server, MODEL, PROMPTS[0],
                         {"max_tokens": 40, "temperature": 0,
                          "structured_outputs": {"json": schema}},
                         exclude_input_in_output=True))
    # The grammar allows whitespace between tokens, which a random model may pick until
    # max_tokens; without it, the text must be (a prefix of) one of the two documents.
    compact = re.sub(r"\s", "", out["text_output"])
    assert compact.startswith('{"answer"')
    assert any(doc.startswith(compact) for doc in ('{"answer":true}', '{"answer":false}'))


@pytest.mark.parametrize("sampling, words", [
    ({"max_tokens": "many"}, ["max_tokens", "integer"]),
    ({"temperature": "hot"}, ["temperature", "number"]),
    ({"no_such_parameter": 1}, ["no_such_parameter"]),
    ({"temperature": -1.0}, ["temperature"]),
    ({"structured_outputs": {"jsonn": {}}}, ["jsonn"]),
    ({"lora_name": "nope"}, ["LoRA", "nope"]),
])
def test_bad_sampling_parameters_answer_with_an_error(server, sampling, words):
    response = generate(server, MODEL, PROMPTS[0], sampling)
    assert response.status_code == 400
    for word in words:
        assert word in response.json()["error"]
    # The model stays healthy for the next request.
    assert httpx.get(f"{server.http_url}/v2/models/{MODEL}/ready").status_code == 200
    _json(generate(server, MODEL, PROMPTS[0], {"max_tokens": 2}))


def test_request_without_prompt_is_an_error(server):
    response = generate(server, MODEL, None, {"max_tokens": 2})
    assert response.status_code == 400
    assert "text_input or input_ids" in response.json()["error"]


# --------------------------------------------------------------------------- gRPC
def _grpc_inputs(grpcclient, prompt, sampling, **flags):
    def tensor(name, value, dtype):
        t = grpcclient.InferInput(name, [1], dtype)
        t.set_data_from_numpy(np.array([value], dtype=object if dtype == "BYTES" else bool))
        return t
    inputs = [tensor("text_input", prompt.encode(), "BYTES"),
              tensor("sampling_parameters", json.dumps(sampling).encode(), "BYTES"),
              tensor("stream", True, "BOOL")]
    inputs += [tensor(name, value, "BOOL") for name, value in flags.items()]
    return inputs


@contextmanager
def _grpc_stream(server, cancel_on_exit=False):
    """A tritonclient gRPC stream whose responses go to a queue: yields (client, queue)."""
    import tritonclient.grpc as grpcclient

    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        yield client, results
    finally:
        client.stop_stream(cancel_requests=cancel_on_exit)
        client.close()


def _is_final(result) -> bool:
    final = result.get_response().parameters.get("triton_final_response")
    return final is not None and final.bool_param


def test_grpc_streaming(server, reference):
    import tritonclient.grpc as grpcclient

    texts, reasons = [], []
    with _grpc_stream(server) as (client, results):
        client.async_stream_infer(MODEL, _grpc_inputs(grpcclient, PROMPTS[0], GREEDY,
                                                      return_finish_reason=True),
                                  enable_empty_final_response=True)
        while True:
            result, error = results.get(timeout=60)
            assert error is None, error
            if result.as_numpy("text_output") is not None:
                texts.append(result.as_numpy("text_output")[0].decode())
                reasons.append(result.as_numpy("finish_reason")[0].decode())
            if _is_final(result):
                break
    assert len(texts) > 4
    assert "".join(texts) == reference[0]["text"]
    assert reasons[-1] == "length"


# ------------------------------------------------------------------ cancellation
def _metric(server, name) -> float:
    return series_total(httpx.get(server.metrics_url).text, name, model=MODEL, version="1")


def _vllm_lines(server) -> str:
    return "\n".join(line for line in httpx.get(server.metrics_url).text.splitlines()
                     if line.startswith("vllm:") and "bucket" not in line)


def _wait_for(predicate, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


# Long enough (seconds on the tiny model) that only an abort ends it early.
LONG = {"temperature": 0, "max_tokens": 2000, "ignore_eos": True}


GENERATED = "vllm:generation_tokens_total"


def _settled(server, name: str) -> float:
    return settled(lambda: _metric(server, name), name, tries=50)


def _assert_generation_stopped(server, tokens_before):
    """The request left vLLM: its tokens were counted, the count stopped well short of
    max_tokens, and nothing runs any more."""
    assert _wait_for(lambda: _metric(server, GENERATED) > tokens_before, timeout=5), (
        _vllm_lines(server))
    settled = _settled(server, GENERATED)
    assert _metric(server, "vllm:num_requests_running") == 0, _vllm_lines(server)
    # It generated (the caller read its first tokens), and stopped well short of the end.
    assert 0 < settled - tokens_before < LONG["max_tokens"] // 2, _vllm_lines(server)


def test_grpc_cancel_aborts_the_request_in_vllm(server):
    import tritonclient.grpc as grpcclient

    tokens_before = _settled(server, GENERATED)
    log_mark = len(server.logs)
    with _grpc_stream(server, cancel_on_exit=True) as (client, results):
        client.async_stream_infer(MODEL, _grpc_inputs(grpcclient, PROMPTS[0], LONG))
        for _ in range(5):
            result, error = results.get(timeout=60)
            assert error is None
    _assert_generation_stopped(server, tokens_before)
    assert "cancelled by the client" in server.logs[log_mark:]


def _send_abort(server, target: str):
    """The backend's abort request for `target`; returns when it is answered."""
    with _grpc_stream(server) as (aborter, aborted):
        aborter.async_stream_infer(MODEL, [], request_id=f"{target}:abort",
                                   parameters={"vllm_abort_request_id": target},
                                   enable_empty_final_response=True)
        result, error = aborted.get(timeout=30)
        assert error is None and _is_final(result)


def _read_to_final(results, timeout=30) -> list[str]:
    """The texts of a gRPC stream's responses, up to its final one."""
    texts = []
    while True:
        result, error = results.get(timeout=timeout)
        assert error is None, error
        if result.as_numpy("text_output") is not None:
            texts.append(result.as_numpy("text_output")[0].decode())
        if _is_final(result):
            return texts


def test_abort_request_before_its_request_answers_it_at_once(server):
    """An abort that comes first is remembered: the request it names generates nothing,
    and uses the abort up."""
    import tritonclient.grpc as grpcclient

    request_id = f"early-{uuid.uuid4().hex[:8]}"
    tokens_before = _settled(server, GENERATED)
    _send_abort(server, request_id)
    with _grpc_stream(server) as (client, results):
        client.async_stream_infer(MODEL, _grpc_inputs(grpcclient, PROMPTS[0], LONG),
                                  request_id=request_id, enable_empty_final_response=True)
        assert _read_to_final(results) == []  # only the empty final response
    time.sleep(0.5)
    assert _settled(server, GENERATED) == tokens_before

    with _grpc_stream(server) as (client, results):
        client.async_stream_infer(MODEL, _grpc_inputs(grpcclient, PROMPTS[0], GREEDY),
                                  request_id=request_id, enable_empty_final_response=True)
        assert "".join(_read_to_final(results))


def test_abort_request_stops_the_named_request(server):
    """The backend's abort request (what the OpenAI frontend sends when its client
    leaves) stops a running request named by its Triton request id."""
    import tritonclient.grpc as grpcclient

    request_id = f"long-{uuid.uuid4().hex[:8]}"
    tokens_before = _settled(server, GENERATED)
    with _grpc_stream(server) as (client, results):
        client.async_stream_infer(MODEL, _grpc_inputs(grpcclient, PROMPTS[0], LONG),
                                  request_id=request_id, enable_empty_final_response=True)
        for _ in range(5):
            result, error = results.get(timeout=60)
            assert error is None
        _send_abort(server, request_id)
        # The named request ends (its final response comes) without the client cancelling.
        _read_to_final(results)
    assert f"request {request_id} aborted by its client" in server.logs, server.log_tail()
    _assert_generation_stopped(server, tokens_before)

    # An abort that found its request is used up: the id may come again and is served.
    with _grpc_stream(server) as (client, results):
        client.async_stream_infer(MODEL, _grpc_inputs(grpcclient, PROMPTS[0], GREEDY),
                                  request_id=request_id, enable_empty_final_response=True)
        assert "".join(_read_to_final(results))


def test_http_disconnect_aborts_the_request_in_vllm(server):
    tokens_before = _settled(server, GENERATED)
    log_mark = len(server.logs)
    with httpx.stream("POST", f"{server.http_url}/v2/models/{MODEL}/generate_stream",
                      json=generate_body(PROMPTS[1], LONG, stream=True), timeout=60) as r:
        for seen, _ in enumerate(iter_events(r), 1):
            if seen == 5:
                break
    # Leaving the block closes the connection mid-stream.
    _assert_generation_stopped(server, tokens_before)
    assert "cancelled by the client" in server.logs[log_mark:]


# ------------------------------------------------------------------- concurrency
def test_64_concurrent_streams_all_complete(server):
    import asyncio

    sampling = {"temperature": 0.8, "seed": 1, "max_tokens": 24, "ignore_eos": True}

    async def one(client, i):
        body = {"text_input": f"{PROMPTS[i % len(PROMPTS)]} {i}", "stream": True,
                "sampling_parameters": json.dumps(sampling), "return_num_output_tokens": True,
                "return_finish_reason": True}
        async with client.stream("POST", f"{server.http_url}/v2/models/{MODEL}/generate_stream",
                                 json=body) as response:
            assert response.status_code == 200
            return [event.json() async for event in aiter_events(response)]

    async def main():
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(limits=limits, timeout=300) as client:
            return await asyncio.gather(*(one(client, i) for i in range(64)))

    started = time.monotonic()
    all_events = asyncio.run(main())
    elapsed = time.monotonic() - started
    for events in all_events:
        assert all("error" not in e for e in events), events[-1]
        assert sum(e["num_output_tokens"] for e in events) == 24
        assert events[-1]["finish_reason"] == "length"
    print(f"64 streams x 24 tokens in {elapsed:.1f} s")


def test_concurrent_streams_carry_more_tokens_each_and_lose_none(server, reference):
    """Eight greedy streams at once: the backend sends several tokens per response (see
    coalesce.py), yet every stream ends with the last, adds up to the exact count and
    joins into the offline engine's text.  (Its first response is not held to one token:
    vLLM merges the outputs that a reader has not taken yet, so on a starved machine the
    first response can carry the first two.)"""
    from concurrent.futures import ThreadPoolExecutor

    def one(i):
        return generate_stream(server, MODEL, PROMPTS[i % len(PROMPTS)], GREEDY,
                               return_num_output_tokens=True, return_finish_reason=True)

    with ThreadPoolExecutor(8) as pool:
        streams = list(pool.map(one, range(8)))
    for i, events in enumerate(streams):
        assert all("error" not in e for e in events), events
        counts = [e["num_output_tokens"] for e in events]
        assert sum(counts) == GREEDY["max_tokens"], counts
        assert "".join(e["text_output"] for e in events) == reference[i % len(PROMPTS)]["text"]
        assert events[-1]["finish_reason"] == "length"


def test_a_clients_stream_interval_is_kept(server, reference):
    events = generate_stream(server, MODEL, PROMPTS[2], {**GREEDY, "stream_interval": 3},
                             return_num_output_tokens=True)
    counts = [e["num_output_tokens"] for e in events]
    # The first token at once, then at least three per response, the rest with the end.
    assert counts[0] == 1 and all(n >= 3 for n in counts[1:-1]), counts
    assert sum(counts) == GREEDY["max_tokens"]
    assert "".join(e["text_output"] for e in events) == reference[2]["text"]
    alone = generate_stream(server, MODEL, PROMPTS[2], {**GREEDY, "stream_interval": 1},
                            return_num_output_tokens=True)
    assert len(alone) > len(events)


# ------------------------------------------------------------------------ metrics
def test_vllm_metrics_with_model_and_version_labels(server):
    _json(generate(server, MODEL, PROMPTS[0], {"max_tokens": 4, "n": 2, "ignore_eos": True}))
    # vLLM's own label beside Triton's: dashboards written for `vllm serve` select on it.
    labels = {"model": MODEL, "version": "1", "model_name": MODEL}
    counters = ["vllm:prompt_tokens_total", "vllm:generation_tokens_total"]
    # Counters that may still be 0 after one request (the prefix cache's with prefix caching
    # off, as on the CPU by default), and the gauges: present, labelled.
    present = {"vllm:num_preemptions_total": "counter", "vllm:prefix_cache_hits_total": "counter",
               "vllm:prefix_cache_queries_total": "counter",
               "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
               "vllm:kv_cache_usage_perc": "gauge"}
    histograms = ["vllm:time_to_first_token_seconds", "vllm:time_per_output_token_seconds",
                  "vllm:request_time_per_output_token_seconds",
                  "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                  "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
                  "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens",
                  "vllm:request_generation_tokens", "vllm:request_params_n",
                  "vllm:request_max_num_generation_tokens", "vllm:request_params_max_tokens",
                  "vllm:request_num_preemptions", "vllm:request_prefill_kv_computed_tokens"]
    # Per token and per engine step: the counters a histogram is read as, pushed in
    # batches, with `le` as vLLM's server writes it.
    batched = ["vllm:inter_token_latency_seconds", "vllm:iteration_tokens_total"]
    assert _wait_for(lambda: _metric(server, "vllm:request_params_n_count") > 0, timeout=10)
    text = httpx.get(server.metrics_url).text
    for name in counters:
        assert series_total(text, name, **labels) > 0, name
        assert metric_type(text, name) == "counter", name
    for name, kind in present.items():
        assert metric_type(text, name) == kind, name
        assert samples(text, name, **labels), name
    for name in histograms:
        assert metric_type(text, name) == "histogram", name
        assert series_total(text, f"{name}_count", **labels) > 0, name
        assert series_total(text, f"{name}_bucket", **labels, le="+Inf") > 0, name
    assert _wait_for(lambda: _metric(server, "vllm:inter_token_latency_seconds_count") > 0,
                     timeout=10)
    text = httpx.get(server.metrics_url).text
    for name in batched:
        for part in ("bucket", "sum", "count"):
            assert metric_type(text, f"{name}_{part}") == "counter", (name, part)
        assert series_total(text, f"{name}_count", **labels) > 0, name
        assert series_total(text, f"{name}_bucket", **labels, le="+Inf") == \
            series_total(text, f"{name}_count", **labels), name
        assert samples(text, f"{name}_bucket", **labels, le="1.0"), name
    # Two choices were asked for at least once.
    assert _metric(server, "vllm:request_params_n_sum") >= 2
    # Each finish reason has its series from the start; both choices ran to max_tokens.
    assert metric_type(text, "vllm:request_success_total") == "counter"
    for reason in ("stop", "length", "abort", "error"):
        assert samples(text, "vllm:request_success_total", **labels,
                       finished_reason=reason), reason
    assert series_total(text, "vllm:request_success_total", **labels,
                        finished_reason="length") >= 2


def test_per_token_histogram_counts_every_gap_between_tokens(server):
    """REPORT_PER_TOKEN_METRICS: one observation per token after the first, exactly."""
    per_token = "vllm:time_per_output_token_seconds_count"
    per_request = "vllm:request_time_per_output_token_seconds_count"
    batched = "vllm:inter_token_latency_seconds_count"  # the same gaps, on by default
    names = (per_request, per_token, batched)
    # Batched values go out up to a second late: read twice more than a second apart.
    before = [_settled(server, per_request), _settled(server, per_token),
              settled(lambda: _metric(server, batched), batched, interval=1.2, tries=20)]
    _json(generate(server, MODEL, PROMPTS[0], {"max_tokens": 8, "ignore_eos": True}))

    def counted():
        return [_metric(server, name) - b for name, b in zip(names, before, strict=True)]
    assert _wait_for(lambda: counted() == [1, 7, 7], timeout=10), counted()

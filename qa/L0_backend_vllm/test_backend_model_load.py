"""Loading, refusing, unloading and health of vLLM models, on a server in explicit model
control mode (so that models are loaded one by one and a failure leaves the server up)."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from qa.common import TritonServer, make_tiny_lora, write_vllm_model
from qa.common.metrics import metric_type, samples, series_total
from qa.common.tritonserver import MODEL_CONTROL_HEADERS

from .vllm_suite import PROMPTS, engine_args, generate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return tmp_path_factory.mktemp("repository")


@pytest.fixture(scope="module")
def server(repo, tiny_model):
    with TritonServer(repo, mounts=[tiny_model],
                      server_args=["--model-control-mode=explicit"]) as running:
        yield running


# With the key of the image's restriction of the repository API (ignored where it is open).
def load(server, name) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v2/repository/models/{name}/load",
                      headers=MODEL_CONTROL_HEADERS, timeout=300)


def unload(server, name) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v2/repository/models/{name}/unload",
                      headers=MODEL_CONTROL_HEADERS, timeout=300)


def ready(server, name) -> bool:
    return httpx.get(f"{server.http_url}/v2/models/{name}/ready").status_code == 200


def engine_processes(server) -> list[psutil.Process]:
    """vLLM engine-core processes under the server (tests that use it are `host_mode`)."""
    assert not server.image, "process checks need a server on this host"
    found = []
    for process in psutil.Process(server._proc.pid).children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and "EngineCore" in process.name():
                found.append(process)
        except psutil.Error:  # exited meanwhile
            pass
    return found


@pytest.mark.parametrize("name, args, words", [
    ("unknown_key", {"max_modle_len": 64}, ["unknown engine argument 'max_modle_len'",
                                             "did you mean 'max_model_len'"]),
    ("missing_model", {"model": "/nonexistent/model-folder"},
     ["'model'", "/nonexistent/model-folder", "does not exist"]),
    ("bad_value", {"max_model_len": "many"}, ["max_model_len"]),
])
def test_bad_model_json_fails_the_load_with_a_clear_message(server, repo, tiny_model, name,
                                                            args, words):
    write_vllm_model(repo, name, {**engine_args(tiny_model), **args}, publish=False)
    response = load(server, name)
    assert response.status_code == 400
    message = response.json()["error"]
    for word in words:
        assert word in message
    assert not ready(server, name)
    assert httpx.get(f"{server.http_url}/v2/health/live").status_code == 200


def test_missing_model_json_fails_the_load(server, repo, tiny_model):
    write_vllm_model(repo, "no_model_json", engine_args(tiny_model))
    (repo / "no_model_json" / "1" / "model.json").unlink()
    response = load(server, "no_model_json")
    assert response.status_code == 400
    assert "model.json: no such file" in response.json()["error"]


def test_discovery_parameters_must_agree_with_model_json(server, repo, tiny_model):
    write_vllm_model(repo, "disagrees", engine_args(tiny_model), publish=False,
                     parameters={"vllm_max_model_len": "1024"})
    response = load(server, "disagrees")
    assert response.status_code == 400
    assert "vllm_max_model_len" in response.json()["error"], server.log_tail(80)
    assert "2048" in response.json()["error"]


def test_tensor_parallel_with_kind_gpu_is_refused(server, repo, tiny_model):
    write_vllm_model(repo, "tp_on_gpu", {**engine_args(tiny_model), "tensor_parallel_size": 2},
                     kind="KIND_GPU")
    response = load(server, "tp_on_gpu")
    assert response.status_code == 400
    message = response.json()["error"]
    # On a machine with GPUs the backend refuses it; on one without, Triton already
    # refuses the GPU instance group itself.
    assert ("set `kind: KIND_MODEL`" in message  # the backend
            or "has kind KIND_GPU but no GPUs are available" in message), message  # Triton


# ----------------------------------------------------------------- LoRA + unload
@pytest.fixture(scope="module")
def lora_model(server, repo, tiny_model):
    args = {**engine_args(tiny_model), "enable_lora": True, "max_lora_rank": 8,
            "max_loras": 1}
    # The adapter lives in the version folder, named relative to it, so that the same
    # repository works mounted into a container.
    write_vllm_model(repo, "tiny_lora", args,
                     files={"multi_lora.json": json.dumps({"sql": "./sql-adapter"})})
    make_tiny_lora(repo / "tiny_lora" / "1" / "sql-adapter")
    response = load(server, "tiny_lora")
    assert response.status_code == 200, response.text
    return "tiny_lora"


def _text(server, model, sampling):
    response = generate(server, model, PROMPTS[0], sampling, exclude_input_in_output=True)
    assert response.status_code == 200, response.text
    return response.json()["text_output"]


def test_lora_adapter_changes_the_output(server, lora_model):
    greedy = {"temperature": 0, "max_tokens": 12, "ignore_eos": True}
    base = _text(server, lora_model, greedy)
    adapted = _text(server, lora_model, {**greedy, "lora_name": "sql"})
    assert adapted != base
    # Deterministic per adapter: the same request gives the same text again.
    assert _text(server, lora_model, {**greedy, "lora_name": "sql"}) == adapted
    assert _text(server, lora_model, greedy) == base


def test_unknown_lora_adapter_is_a_clear_error(server, lora_model):
    response = generate(server, lora_model, PROMPTS[0], {"lora_name": "chat"})
    assert response.status_code == 400
    assert "unknown LoRA adapter 'chat' (this model serves: sql)" in response.json()["error"]


@pytest.mark.host_mode
def test_unload_ends_the_engine_and_its_processes(server, lora_model):
    assert engine_processes(server), "an engine process runs while the model is loaded"
    started = time.monotonic()
    assert unload(server, lora_model).status_code == 200
    # Unload returns at once; the model goes away when its engine has stopped.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (ready(server, lora_model) or engine_processes(server)):
        time.sleep(0.5)
    assert not ready(server, lora_model)
    assert not engine_processes(server)
    assert time.monotonic() - started < 60


# ------------------------------------------------------------- autoscaling gauges
def _gauges(server, model) -> dict[str, float]:
    """The scheduler gauges autoscalers read (the Helm chart's HPA and KEDA triggers)."""
    text = httpx.get(server.metrics_url).text
    out = {}
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc"):
        assert metric_type(text, name) == "gauge", name
        assert samples(text, name, model=model), f"{name} of {model} missing:\n{text}"
        out[name.split(":")[1]] = series_total(text, name, model=model, version="1")
    return out


def test_scheduler_gauges_follow_the_queue(server, repo, tiny_model):
    """Two sequences at a time: of six long requests, two run and four wait, and the KV
    cache fills; once they end every gauge is back to zero, and exactly six requests were
    counted (not the warm-up generation)."""
    write_vllm_model(repo, "tiny_queue", {**engine_args(tiny_model), "max_num_seqs": 2},
                     parameters={"REPORT_CUSTOM_METRICS": "true"})
    assert load(server, "tiny_queue").status_code == 200
    try:
        # The backend's warm-up generation ran before ready (and is left out of the
        # exact request counts below).
        assert "tiny_queue: warm-up generation took" in server.logs, server.log_tail()
        long = {"temperature": 0, "max_tokens": 1500, "ignore_eos": True}
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(generate, server, "tiny_queue", PROMPTS[0], long, timeout=300)
                       for _ in range(6)]
            seen: list[dict] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(f.done() for f in futures):
                seen.append(_gauges(server, "tiny_queue"))
                if seen[-1]["num_requests_waiting"] >= 4:
                    break
                time.sleep(0.1)
            assert all(f.result().status_code == 200 for f in futures)
        busiest = max(seen, key=lambda g: g["num_requests_waiting"])
        assert busiest["num_requests_waiting"] == 4, seen[-5:]
        assert busiest["num_requests_running"] == 2, busiest
        assert 0 < busiest["kv_cache_usage_perc"] <= 1, busiest
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_gauges(server, "tiny_queue").values()):
            time.sleep(0.2)
        assert _gauges(server, "tiny_queue") == {"num_requests_running": 0,
                                                  "num_requests_waiting": 0,
                                                  "kv_cache_usage_perc": 0}
        # The default set: each request's mean time per token, no per-token series.
        def per_request() -> float:
            return series_total(httpx.get(server.metrics_url).text,
                                "vllm:request_time_per_output_token_seconds_count",
                                model="tiny_queue", version="1")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and per_request() != 6:
            time.sleep(0.2)
        assert per_request() == 6
        text = httpx.get(server.metrics_url).text
        assert not samples(text, "vllm:time_per_output_token_seconds_count", model="tiny_queue")
    finally:
        unload(server, "tiny_queue")


# ------------------------------------------------------------------------ health
@pytest.mark.host_mode
def test_dead_engine_makes_the_model_unavailable_with_clear_errors(server, repo, tiny_model):
    write_vllm_model(repo, "tiny_health", engine_args(tiny_model),
                     parameters={"ENABLE_VLLM_HEALTH_CHECK": "true"})
    assert load(server, "tiny_health").status_code == 200
    assert generate(server, "tiny_health", PROMPTS[0], {"max_tokens": 2}).status_code == 200
    # The watch's health request, through Triton's generate endpoint: one empty answer.
    check = httpx.post(f"{server.http_url}/v2/models/tiny_health/generate",
                       json={"parameters": {"vllm_health_check": True}}, timeout=30)
    assert check.status_code == 200 and "error" not in check.json(), check.text
    for process in engine_processes(server):
        os.kill(process.pid, signal.SIGKILL)
    response = generate(server, "tiny_health", PROMPTS[0], {"max_tokens": 2}, timeout=60)
    # Triton's generate endpoint answers a model's error with a 400 whatever its code
    # (UNAVAILABLE here); the phrase tells clients (the frontend: 503, the watch) it is
    # the server's fault.
    assert response.status_code in (400, 503), response.text
    assert "engine of model 'tiny_health' died" in response.json()["error"]
    assert "cannot serve it until it is restarted" in response.json()["error"]
    check = httpx.post(f"{server.http_url}/v2/models/tiny_health/generate",
                       json={"parameters": {"vllm_health_check": True}}, timeout=30)
    assert check.status_code in (400, 503) and "died" in check.text, check.text


@pytest.mark.host_mode
def test_server_stops_cleanly(server):
    """Last: stopping the server ends every model and process without hanging."""
    processes = psutil.Process(server._proc.pid).children(recursive=True)
    started = time.monotonic()
    code = server.stop(timeout=60)
    assert code == 0, server.log_tail()
    assert time.monotonic() - started < 30
    def alive(process):
        try:
            return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    assert not [p for p in processes if alive(p)]

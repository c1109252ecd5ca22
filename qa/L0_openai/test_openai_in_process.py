"""The OpenAI frontend with Triton in its own process (`triton-openai --model-repository`).

No tritonserver runs: the frontend loads libtritonserver and serves the suite's models
through Triton's C API (frontends/openai/.../triton/inprocess_client.py).  In the image
pass, a container of the image started as a user starts it (its entrypoint with
TRITON_IN_PROCESS=1); on a host, this checkout's frontend with the nvidia-pytriton
wheel's library and backends.  The same engine, backend and
models as the rest of the suite.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from qa.common import wait_until, write_vllm_model
from qa.common.metrics import samples
from qa.common.sse import iter_events

from .conftest import EMBED_MODEL, LORA, MODEL, write_repository
from .frontend_process import InProcessFrontend
from .test_openai_api import check_disconnect_stops_generation

pytestmark = pytest.mark.e2e

PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def repository(tmp_path_factory, tiny_model):
    return write_repository(tmp_path_factory.mktemp("in-process"), tiny_model)


@pytest.fixture(scope="module")
def frontend(repository, tiny_model):
    with InProcessFrontend(repository, mounts=[tiny_model]) as fe:
        yield fe


@pytest.fixture(scope="module")
def http(frontend):
    with httpx.Client(base_url=frontend.url, timeout=120) as client:
        yield client


def _events(http, path: str, body: dict, begun: threading.Event | None = None) -> list[dict]:
    """A streamed answer's events; `begun` is set once the first one came."""
    events = []
    with http.stream("POST", path, json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        for event in iter_events(resp):
            if not event.done:
                events.append(event.json())
                if begun is not None:
                    begun.set()
    return events


def test_models_of_the_repository_are_listed(http):
    ids = [m["id"] for m in http.get("/v1/models").json()["data"]]
    assert {MODEL, f"{MODEL}:{LORA}", EMBED_MODEL} <= set(ids)


def test_a_stream_equals_the_whole_answer_and_usage_counts_its_tokens(http):
    body = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    whole = http.post("/v1/chat/completions", json=body).json()
    events = _events(http, "/v1/chat/completions",
                     {**body, "stream_options": {"include_usage": True}})
    text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    assert events[-1]["usage"] == whole["usage"]
    assert whole["usage"]["completion_tokens"] == 24
    # The stream ends as the whole answer did: at the token budget.
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "length"


def test_lora_adapter_and_embeddings_are_served(http):
    body = {"prompt": PROMPT, "max_tokens": 8, "temperature": 0, "ignore_eos": True}
    base = http.post("/v1/completions", json={**body, "model": MODEL}).json()
    adapted = http.post("/v1/completions", json={**body, "model": f"{MODEL}:{LORA}"}).json()
    assert base["usage"]["completion_tokens"] == adapted["usage"]["completion_tokens"] == 8
    emb = http.post("/v1/embeddings", json={"model": EMBED_MODEL, "input": PROMPT}).json()
    assert len(emb["data"][0]["embedding"]) > 8


def test_bad_requests_get_openai_errors(http):
    resp = http.post("/v1/completions", json={"model": MODEL, "prompt": PROMPT,
                                              "max_tokens": 100_000})
    assert resp.status_code == 400, resp.text
    assert http.post("/v1/completions", json={"model": "nope", "prompt": "x"}).status_code == 404


def test_metrics_carry_tritons_and_vllms_series(http):
    http.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 2})
    text = http.get("/metrics").text
    assert samples(text, "openai_frontend_requests_total", path="/v1/completions")
    assert samples(text, "nv_inference_request_success", model=MODEL)
    assert samples(text, "vllm:generation_tokens_total")


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_leaves_stops_its_generation(frontend, http, stream):
    check_disconnect_stops_generation(frontend.url, http, lambda: frontend.log, stream)


def test_a_model_that_fails_to_load_stops_the_frontend_with_status_1(tmp_path):
    """As tritonserver exits when a model fails to load at start."""
    write_vllm_model(tmp_path, "broken", {"model": str(tmp_path / "no-such-model")})
    fe = InProcessFrontend(tmp_path, wait=False)
    try:
        wait_until(lambda: fe.exit_status() is not None, timeout=240,
                   describe="the frontend to exit")
        assert fe.exit_status() == 1, fe.log[-3000:]
        assert "failed to load" in fe.log
    finally:
        fe.stop(timeout=10)


def test_a_dead_engine_ends_the_streams_and_stops_the_frontend_with_status_4(tmp_path,
                                                                            tiny_model):
    """Nothing in the process can load the model again: it exits, as the image's model
    watch stops the container, for the orchestrator to restart it."""
    write_vllm_model(tmp_path, MODEL, {"model": str(tiny_model), "max_model_len": 256})
    with InProcessFrontend(tmp_path, mounts=[tiny_model]) as fe:
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 200, "ignore_eos": True}
        ended: dict = {}
        begun = threading.Event()

        def stream():
            with httpx.Client(base_url=fe.url, timeout=120) as client:
                try:
                    ended["events"] = _events(client, "/v1/completions", body, begun)
                except httpx.HTTPError as err:
                    ended["cut"] = repr(err)

        reader = threading.Thread(target=stream)
        reader.start()
        assert begun.wait(60), "the stream never began"
        fe.kill("VLLM::EngineCore")
        killed = time.monotonic()
        wait_until(lambda: fe.exit_status() is not None, timeout=60,
                   describe="the frontend to exit")
        exited = time.monotonic() - killed
        reader.join(30)
        print(f"exited {exited:.1f} s after the kill with {fe.exit_status()}")
        assert fe.exit_status() == 4, fe.log[-3000:]
        assert "error" in ended.get("events", [{}])[-1], ended  # told, not cut
        assert exited < 15, fe.log[-3000:]


# Last of the tests on the module's frontend: it stops it.
def test_a_stop_finishes_the_streams_in_flight_then_exits_0(frontend):
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 64, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    done: dict = {}
    begun = threading.Event()

    def stream():
        with httpx.Client(base_url=frontend.url, timeout=120) as client:
            done["usage"] = _events(client, "/v1/completions", body, begun)[-1].get("usage")

    reader = threading.Thread(target=stream)
    reader.start()
    assert begun.wait(60), "the stream never began"
    status = frontend.stop(timeout=60)
    reader.join(60)
    assert done.get("usage", {}).get("completion_tokens") == 64, frontend.log[-3000:]
    assert status == 0, frontend.log[-3000:]


SLOW_MODEL = """\
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(600)  # a load far longer than any stop may wait

    def execute(self, requests):
        return []
"""


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_stop_while_the_models_load_ends_at_once(tmp_path):
    """Triton cannot cancel a load (minutes for a large model): a SIGTERM during one
    ends the frontend at once, with status 0, not when the orchestrator kills it."""
    model = tmp_path / "slow"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'instance_group [ { count: 1 kind: KIND_CPU } ]\n')
    (model / "1" / "model.py").write_text(SLOW_MODEL)
    fe = InProcessFrontend(tmp_path, wait=False)
    try:
        wait_until(lambda: _answers(f"{fe.url}/health/live"), timeout=240,
                   describe="the frontend to answer")
        wait_until(lambda: "loading: slow" in fe.log, timeout=60,
                   describe="Triton to begin loading the model")
        began = time.monotonic()
        status = fe.stop(timeout=30)  # None: it had to be killed
        assert status == 0, fe.log[-3000:]
        assert time.monotonic() - began < 15
    finally:
        fe.stop(timeout=10)

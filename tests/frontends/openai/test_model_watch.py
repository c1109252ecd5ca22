"""The model watch (health/model_watch.py): a model whose engine or stub died makes
readiness 503 and its requests are refused by the frontend itself, within 2 s; a model
that is only slow is not dead until it misses 3 checks in a row; one that answers again
is served again."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi.testclient import TestClient
from openai_fakes import FakeTriton
from prometheus_client import CollectorRegistry

from qa.common.metrics import samples
from triton_openai import FrontendConfig, build_app
from triton_openai.cli import build_parser, config_from_args
from triton_openai.health.model_watch import ModelWatch
from triton_openai.served_models.catalog import ModelCatalog
from triton_openai.triton import vllm_contract as wire
from triton_openai.triton.client import TritonError, model_error

# What the frontend reads from Triton when the vLLM engine died (the backend's words,
# tagged engine_dead), and for a dead stub (Triton's own words, with the 400 it comes with).
ENGINE_DEAD = model_error("[engine_dead] the vLLM engine of model 'llm' died (EngineDeadError: "
                          f"EngineCore encountered an issue); the server {wire.DEAD_PHRASE}")
STUB_DEAD = model_error("Stub process 'llm_0_0' is not healthy.", 400)
CHAT = {"model": "llm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _wait_for(c, path, status, within):
    """The response of `path` once it answers `status`, and how long that took."""
    started = time.monotonic()
    while True:
        r = c.get(path)
        took = time.monotonic() - started
        if r.status_code == status or took > within:
            assert r.status_code == status, f"{path}: {r.status_code} {r.text} after {took:.1f} s"
            return r, took
        time.sleep(0.02)


def _metric(c, name: str, **labels: str) -> float | None:
    """The value of the one series `name` with `labels` on the frontend's /metrics page,
    read with the Prometheus parser (None when there is none)."""
    found = samples(c.get("/metrics").text, name, **labels)
    assert len(found) <= 1, found
    return found[0].value if found else None


@pytest.mark.parametrize("answer", [ENGINE_DEAD, STUB_DEAD], ids=["engine", "stub"])
def test_a_dead_answer_refuses_the_model_within_2_s_without_asking_triton(make_client, answer):
    fake = FakeTriton()
    c = make_client(fake=fake)
    _wait_for(c, "/health/ready", 200, within=5)
    fake.health["llm"] = answer
    r, took = _wait_for(c, "/health/ready", 503, within=2)
    # Which model, not the engine's words: anyone can read readiness; the log has them.
    assert r.json()["status"] == "model llm cannot serve" and took < 2
    for path, body in [("/v1/chat/completions", CHAT),
                       ("/v1/completions", {"model": "llm", "prompt": "a", "max_tokens": 2}),
                       ("/v1/chat/completions", dict(CHAT, stream=True))]:
        r = c.post(path, json=body)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"]
        error = r.json()["error"]
        assert error["type"] == "service_unavailable" and "`llm` cannot serve" in error["message"]
    assert fake.requests == [], "a request for the dead model reached Triton"
    # The other model is served as before; the list still shows the dead one.
    assert c.post("/v1/embeddings", json={"model": "embed", "input": "a"}).status_code == 200
    assert c.get("/v1/models/llm").status_code == 200
    assert _metric(c, "openai_frontend_model_healthy", model="llm") == 0
    assert _metric(c, "openai_frontend_model_healthy", model="embed") == 1
    assert _metric(c, "openai_frontend_model_deaths_total", model="llm") == 1


def test_a_model_that_answers_again_is_served_again(make_client):
    fake = FakeTriton()
    c = make_client(fake=fake)
    _wait_for(c, "/health/ready", 200, within=5)
    fake.health["llm"] = ENGINE_DEAD
    _wait_for(c, "/health/ready", 503, within=2)
    assert c.post("/v1/chat/completions", json=CHAT).status_code == 503
    fake.health["llm"] = None  # e.g. the model reloaded in Triton
    _wait_for(c, "/health/ready", 200, within=2)
    assert c.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert _metric(c, "openai_frontend_model_healthy", model="llm") == 1
    assert _metric(c, "openai_frontend_model_deaths_total", model="llm") == 1


def _watch(fake, timeout=0.05):
    catalog = ModelCatalog(fake)
    return ModelWatch(fake.model_health, catalog, CollectorRegistry(), 0.01, timeout), catalog


@pytest.mark.parametrize("answer", [ENGINE_DEAD, STUB_DEAD], ids=["engine", "stub"])
def test_one_dead_answer_is_enough(answer):
    fake = FakeTriton()
    fake.health["llm"] = answer

    async def main():
        watch, catalog = _watch(fake)
        await watch._check("llm")
        return catalog.dead

    assert asyncio.run(main()) == {"llm": answer.message}


def test_a_death_is_told_once_to_whoever_stops_for_it():
    fake = FakeTriton()
    fake.health["llm"] = ENGINE_DEAD
    told = []

    async def main():
        catalog = ModelCatalog(fake)
        watch = ModelWatch(fake.model_health, catalog, CollectorRegistry(), 0.01, 0.05,
                           on_dead=lambda name, why: told.append((name, why)))
        for _ in range(3):  # still dead at each check: one death
            await watch._check("llm")
        fake.health["llm"] = None
        await watch._check("llm")
        fake.health["llm"] = ENGINE_DEAD
        await watch._check("llm")  # dead again: a second death

    asyncio.run(main())
    assert told == [("llm", ENGINE_DEAD.message)] * 2


@pytest.mark.parametrize("failure", ["timeout", "unreachable"])
def test_a_slow_or_unreachable_model_is_dead_only_after_3_misses_in_a_row(failure):
    fake = FakeTriton()
    if failure == "timeout":
        fake.health_delay = 10  # busy: no answer within the check's timeout
    else:
        fake.health["llm"] = TritonError("cannot reach Triton at triton:8000: refused", 503)

    async def main():
        watch, catalog = _watch(fake)
        for _ in range(2):
            await watch._check("llm")
        alive_before = "llm" not in catalog.dead
        fake.health_delay, fake.health["llm"] = 0, None
        await watch._check("llm")  # an answer in between starts the count again
        fake.health["llm"] = TritonError("timed out", 503)
        for _ in range(2):
            await watch._check("llm")
        alive_again = "llm" not in catalog.dead
        await watch._check("llm")
        return alive_before, alive_again, catalog.dead.get("llm", "")

    alive_before, alive_again, why = asyncio.run(main())
    assert alive_before and alive_again
    assert why == "timed out (3 health checks in a row)"


def test_a_model_that_does_not_take_the_health_check_is_not_called_dead():
    # A Triton model of another vLLM backend: Triton refuses a request without its inputs.
    fake = FakeTriton()
    fake.health["llm"] = TritonError("expected 1 inputs but got 0 inputs for model 'llm'", 400)

    async def main():
        watch, catalog = _watch(fake)
        for _ in range(4):
            await watch._start_checks()
            await asyncio.sleep(0.02)
        return catalog.dead, fake.health_checks.count("llm"), fake.health_checks.count("embed")

    dead, llm_checks, embed_checks = asyncio.run(main())
    assert dead == {} and llm_checks == 1 and embed_checks == 4


def test_the_flag_sets_the_interval_or_turns_the_watch_off(make_client):
    assert build_parser().parse_args([]).model_health_interval == 0.5
    assert build_parser().parse_args(["--model-health-interval", "2"]).model_health_interval == 2
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--model-health-interval", "-1"])
    off = config_from_args(build_parser().parse_args(["--model-health-interval", "0",
                                                      "--triton-metrics-url", ""]))
    fake = FakeTriton()
    fake.health["llm"] = ENGINE_DEAD
    c = make_client(off, fake=fake)
    _wait_for(c, "/health/ready", 200, within=5)
    time.sleep(0.6)
    assert fake.health_checks == [] and c.get("/health/ready").status_code == 200
    assert c.post("/v1/chat/completions", json=CHAT).status_code == 200


def test_a_check_in_flight_does_not_hold_up_the_shutdown():
    fake = FakeTriton()
    fake.health_delay = 60  # a model that never answers
    with TestClient(build_app(FrontendConfig(triton_metrics_url=None), client=fake)):
        deadline = time.monotonic() + 5
        while not fake.health_checks and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fake.health_checks, "the watch never asked"
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 1
    assert fake.health_cancelled >= 1 and fake.closed


@pytest.mark.parametrize("sent, dead", [
    (f"[{wire.ENGINE_DEAD}] the vLLM engine of model 'llm' died", True),
    # Unavailable for a while (unloading): a miss, whatever the words say.
    (f"[{wire.UNAVAILABLE}] the model is unloading", False),
    (f"[{wire.UNAVAILABLE}] the vLLM engine of model 'llm' died; the server "
     f"{wire.DEAD_PHRASE}", False),
], ids=["engine_dead", "unavailable", "unavailable-with-the-words"])
def test_the_backends_kind_not_its_words_says_the_engine_is_dead(sent, dead):
    fake = FakeTriton()
    # As every transport reads it: the generate endpoint's 400, a stream's error text.
    fake.health["llm"] = model_error(sent, 400)

    async def main():
        watch, catalog = _watch(fake)
        await watch._check("llm")
        return "llm" in catalog.dead, watch._misses.get("llm", 0)

    assert asyncio.run(main()) == (dead, 0 if dead else 1)

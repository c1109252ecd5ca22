"""/health/ready waits for what a first request needs; /health/live looks at nothing."""

from __future__ import annotations

import threading
import time

from fastapi.testclient import TestClient
from openai_fakes import FakeTriton

from triton_openai import FrontendConfig, build_app


def _wait_status(c, path, status, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.get(path)
        if r.status_code == status:
            return r
        time.sleep(0.02)
    raise AssertionError(f"{path} never answered {status}: {r.status_code} {r.text}")


def test_ready_only_once_every_models_tokenizer_is_loaded(make_client, monkeypatch):
    from triton_openai.health import warmup

    release = threading.Event()
    loaded = []

    def slow_load(self, model):
        release.wait(5)
        loaded.append(model.id)

    monkeypatch.setattr(warmup.Warmup, "_load", slow_load)
    c = make_client()
    r = c.get("/health/ready")
    assert r.status_code == 503 and r.json()["status"].startswith("loading the tokenizer of")
    assert c.get("/health/live").status_code == 200
    release.set()
    _wait_status(c, "/health/ready", 200)
    assert sorted(loaded) == ["embed", "llm"]


def test_a_failed_warm_up_does_not_hold_readiness_back(make_client, monkeypatch):
    from triton_openai.health import warmup

    def broken(self, model):
        raise OSError("tokenizer.json is unreadable")

    monkeypatch.setattr(warmup.Warmup, "_load", broken)
    c = make_client()
    _wait_status(c, "/health/ready", 200)


def test_the_tokenizer_library_is_imported_before_triton_is_ready(make_client, monkeypatch):
    # transformers' import takes seconds: it runs while Triton still loads its models.
    from triton_openai.health import warmup

    imported = threading.Event()
    monkeypatch.setattr(warmup.Warmup, "import_libraries", staticmethod(imported.set))
    c = make_client(fake=FakeTriton(ready=False))
    assert imported.wait(5)
    assert c.get("/health/ready").json() == {"status": "Triton server is not ready"}


def test_a_stop_during_the_import_does_not_wait_for_it(monkeypatch):
    # A SIGTERM seconds after the start must not wait for transformers' import.
    from triton_openai.health import warmup

    started, release = threading.Event(), threading.Event()

    def slow_import():
        started.set()
        release.wait(30)

    monkeypatch.setattr(warmup.Warmup, "import_libraries", staticmethod(slow_import))
    try:
        with TestClient(build_app(FrontendConfig(triton_metrics_url=None),
                                  client=FakeTriton(ready=False))):
            assert started.wait(5)
            stopping = time.monotonic()
        assert time.monotonic() - stopping < 2
    finally:
        release.set()


def test_readiness_follows_triton_going_away_and_coming_back(make_client):
    fake = FakeTriton()
    c = make_client(fake=fake)
    _wait_status(c, "/health/ready", 200)
    fake.ready = False
    assert c.get("/health/ready").json() == {"status": "Triton server is not ready"}
    assert c.get("/health/live").status_code == 200
    fake.ready = True
    _wait_status(c, "/health/ready", 200)


def test_readiness_can_require_models_by_name(make_client):
    from triton_openai.triton.client import ModelInfo

    llm = ModelInfo("llm", "1", True, {"vllm_model": "/nonexistent", "vllm_runner": "generate"})
    fake = FakeTriton(models=[llm, ModelInfo("later", "1", False, {})])
    c = make_client(fake=fake)
    _wait_status(c, "/health/ready?model=llm", 200)
    # A model Triton lists but has not made READY, and one it does not know, both hold it.
    r = c.get("/health/ready?model=llm&model=later&model=nowhere")
    assert r.status_code == 503
    assert r.json()["status"].startswith("not serving later, nowhere")
    assert c.get("/health/ready").status_code == 200


def test_readiness_says_which_check_failed_but_not_triton_s_words(make_client, caplog):
    from triton_openai.triton.client import TritonError

    fake = FakeTriton()
    c = make_client(fake=fake)
    _wait_status(c, "/health/ready", 200)

    async def unreachable():
        raise TritonError("cannot reach Triton at triton.internal.svc:8000: [Errno 111] "
                          "Connection refused", 503)

    fake.list_models = unreachable
    c.app.state.catalog._fetched = 0.0  # the next readiness check asks Triton again
    for _ in range(3):
        r = c.get("/health/ready")
        assert r.status_code == 503 and r.json() == {"status": "cannot list Triton's models"}
    logged = [rec.getMessage() for rec in caplog.records if "triton.internal.svc" in
              rec.getMessage()]
    assert len(logged) == 1  # once per reason, not once per probe

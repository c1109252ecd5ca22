"""Deployment options of `triton-openai`, each in a frontend process of its own, against
the suite's tritonserver: API key, request size limit, CORS, names, graceful shutdown."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest

from qa.common.sse import iter_events

from .conftest import MODEL, triton_url
from .frontend_process import FrontendProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _frontend(stack, *args, **kw) -> FrontendProcess:
    return FrontendProcess(triton_url(stack.triton), *args, metrics_url=stack.triton.metrics_url,
                           **kw)


def test_api_key(stack):
    with _frontend(stack, "--api-key", "s3cret") as fe:
        with httpx.Client(base_url=fe.url, timeout=60) as c:
            r = c.get("/v1/models")
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
            r = c.get("/v1/models", headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401
            r = c.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200
            assert c.get("/health/ready").status_code == 200  # probes need no key


def test_api_key_from_environment_and_openai_client(stack):
    import openai

    with _frontend(stack, env={"TRITON_OPENAI_API_KEY": "from-env"}) as fe:
        good = openai.OpenAI(base_url=f"{fe.url}/v1", api_key="from-env", max_retries=0)
        assert good.models.retrieve(MODEL).id == MODEL
        bad = openai.OpenAI(base_url=f"{fe.url}/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()


def test_size_limit_cors_names_and_json_logs(stack):
    with _frontend(stack, "--max-request-bytes", "2000", "--cors-origins", "http://ui.test",
                   "--served-model-name", f"{MODEL}=public-tiny", "--log-format", "json") as fe:
        with httpx.Client(base_url=fe.url, timeout=60) as c:
            r = c.post("/v1/completions", json={"model": "public-tiny", "prompt": "x" * 5000})
            assert r.status_code == 413 and set(r.json()["error"]) == {
                "message", "type", "param", "code"}
            r = c.post("/v1/completions", json={"model": "public-tiny", "prompt": "Hello",
                                                 "max_tokens": 3})
            assert r.status_code == 200 and r.json()["model"] == "public-tiny"
            assert c.post("/v1/completions", json={"model": MODEL, "prompt": "Hello"}
                          ).status_code == 404
            r = c.options("/v1/chat/completions", headers={
                "Origin": "http://ui.test", "Access-Control-Request-Method": "POST"})
            assert r.headers.get("access-control-allow-origin") == "http://ui.test"
        time.sleep(0.2)
        lines = [json.loads(line) for line in fe.log.splitlines() if line.startswith("{")]
        assert any(entry.get("path") == "/v1/completions" and entry.get("status") == 200
                   for entry in lines)


@pytest.mark.parametrize("scheme", ["", "http://"])
def test_not_ready_without_triton(scheme):
    """Nothing listens on the Triton port: ready is 503, and so are API calls."""
    from qa.common import free_port

    with FrontendProcess(f"{scheme}127.0.0.1:{free_port()}", wait_ready=False) as fe:
        with httpx.Client(base_url=fe.url, timeout=30) as c:
            assert c.get("/health/live").status_code == 200
            assert c.get("/health/ready").status_code == 503
            r = c.post("/v1/completions", json={"model": MODEL, "prompt": "x"})
            assert r.status_code == 503 and r.json()["error"]["type"] == "service_unavailable"


def test_graceful_shutdown_finishes_streams(stack):
    with _frontend(stack) as fe:
        events: list = []
        started = threading.Event()

        def stream():
            with httpx.Client(base_url=fe.url, timeout=60) as c:
                with c.stream("POST", "/v1/completions", json={
                        "model": MODEL, "prompt": "Hello", "max_tokens": 300, "stream": True,
                        "ignore_eos": True}) as resp:
                    for event in iter_events(resp):
                        events.append(event)
                        started.set()

        t = threading.Thread(target=stream)
        t.start()
        assert started.wait(30)
        fe.proc.send_signal(signal.SIGTERM)
        t.join(60)
        # Uvicorn re-raises the signal once it has shut down gracefully.
        assert fe.proc.wait(60) in (0, -signal.SIGTERM)
        assert events[-1].done
        last = events[-2].json()
        assert last["choices"][0]["finish_reason"] == "length"
        text = "".join(e.json()["choices"][0]["text"] for e in events[:-1])
        assert text

"""Request ids: the client's X-Request-Id is echoed and logged; each HTTP request gets an
internal id of its own, which its Triton requests, its abort and its answer id carry."""

import asyncio
import json
import logging

import httpx
import pytest
from openai_fakes import FakeTokenizers, FakeTriton
from test_http_client import FakeTritonHttp

from triton_openai import FrontendConfig, build_app
from triton_openai.triton.http_client import HttpTritonClient
from triton_openai.web import request_ids

MSG = [{"role": "user", "content": "hi"}]


def test_the_clients_id_is_echoed_and_logged_but_never_sent_to_triton(client, triton, caplog):
    caplog.set_level(logging.INFO, logger="triton_openai.access")
    r = client.post("/v1/completions", headers={"X-Request-Id": "trace-42"},
                    json={"model": "llm", "prompt": ["a b", "c"], "max_tokens": 2})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "trace-42"
    internal = r.json()["id"].removeprefix("cmpl-")
    assert len(internal) == 32 and internal != "trace-42"
    # Every Triton request of the HTTP request carries the one internal id.
    assert [q["request_id"] for q in triton.requests] == [internal, internal]
    # One access-log line names both: a grep for the client's id finds Triton's.
    [line] = [rec.getMessage() for rec in caplog.records if "trace-42" in rec.getMessage()]
    assert line.endswith(f" trace-42 {internal}")


def test_requests_that_share_an_id_get_triton_ids_of_their_own(make_client):
    """A proxy's retry keeps its x-request-id: the two requests overlap in Triton."""
    fake = FakeTriton(delay=0.02)
    app = make_client(fake=fake).app

    async def both():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await asyncio.gather(*(
                c.post("/v1/chat/completions", headers={"X-Request-Id": "retry-1"},
                       json={"model": "llm", "messages": MSG, "max_tokens": 5, "stream": True})
                for _ in range(2)))

    first, second = asyncio.run(both())
    assert first.headers["x-request-id"] == second.headers["x-request-id"] == "retry-1"
    ids = [q["request_id"] for q in fake.requests]
    assert len(ids) == 2 and len(set(ids)) == 2 and "retry-1" not in ids
    # Each got its whole answer, and answer ids differ.
    for r, rid in zip((first, second), ids, strict=True):
        assert f'"id":"chatcmpl-{rid}"' in r.text.replace(" ", "")
        assert r.text.count('"finish_reason":"length"') == 1


def test_an_id_is_made_when_the_client_sends_none(client, triton):
    first = client.post("/v1/chat/completions", json={"model": "llm", "messages": MSG,
                                                      "max_tokens": 1, "stream": True})
    second = client.post("/v1/embeddings", json={"model": "embed", "input": "x"})
    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
    assert [q["request_id"] for q in triton.requests] == ids
    assert f'"id":"chatcmpl-{ids[0]}"' in first.text.replace(" ", "")


def test_errors_carry_the_id_too(client):
    r = client.post("/v1/chat/completions", headers={"X-Request-Id": "e1"},
                    json={"model": "nope", "messages": MSG})
    assert r.status_code == 404 and r.headers["x-request-id"] == "e1"


def test_an_id_that_cannot_go_into_a_log_line_is_400(client, triton):
    r = client.post("/v1/completions", headers={"X-Request-Id": "a b"},
                    json={"model": "llm", "prompt": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "X-Request-Id"
    assert triton.requests == []
    r = client.get("/v1/models", headers={"X-Request-Id": "x" * 129})
    assert r.status_code == 400


@pytest.mark.parametrize("value, valid", [
    ("trace-42", True),
    ("x" * 128, True),
    ("x" * 129, False),
    ("", False),
    ("a b", False),
    ("llm\n", False),  # `$` alone matches before a final newline
    ("a\r\nX-Forged: 1", False),
    ("caf\xe9", False),
])
def test_which_ids_are_taken(value, valid):
    assert request_ids.is_valid(value) is valid


def test_an_abort_names_the_internal_id_not_the_clients():
    """A client that leaves a stream: the HTTP transport's abort request reaches the
    vLLM backend with the id only this HTTP request's Triton requests carry."""
    async def main():
        async with FakeTritonHttp(forever=True) as triton:
            client = HttpTritonClient(triton.url)
            app = build_app(FrontendConfig(triton_metrics_url=None, model_health_interval=0),
                            client=client)
            app.state.completions.gen.tokenizers = FakeTokenizers()
            body = json.dumps({"model": "llm", "prompt": "a", "stream": True}).encode()
            chunks, sent = [], asyncio.Event()

            async def receive():
                if not sent.is_set():
                    sent.set()
                    return {"type": "http.request", "body": body, "more_body": False}
                while len(chunks) < 3:  # the client reads two events, then leaves
                    await asyncio.sleep(0.01)
                return {"type": "http.disconnect"}

            async def send(message):
                if message["type"] == "http.response.body" and message.get("body"):
                    chunks.append(message["body"])

            scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                     "method": "POST", "scheme": "http", "path": "/v1/completions",
                     "raw_path": b"/v1/completions", "query_string": b"", "root_path": "",
                     "headers": [(b"content-type", b"application/json"),
                                 (b"content-length", str(len(body)).encode()),
                                 (b"x-request-id", b"shared-id")],
                     "client": ("127.0.0.1", 1), "server": ("t", 80)}
            await asyncio.wait_for(app(scope, receive, send), 10)
            await client.close()  # waits for the abort request in flight
            # Not the aborts, nor the opening of the model's feed (triton/feed.py).
            generated = [b for path, b in triton.requests if path.endswith("/generate_stream")
                         and not {"vllm_abort_request_id", "vllm_feed_open"}
                         & set(b.get("parameters") or {})]
            return [b["id"] for b in generated], triton.aborted

    generated, aborted = asyncio.run(main())
    assert len(generated) == 1 and generated[0] != "shared-id" and len(generated[0]) == 32
    assert aborted == generated

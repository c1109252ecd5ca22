"""A client's `X-Request-Id` is its own to read, never a key other requests collide on.

Proxies keep the header on their retries (Envoy and Istio do), clients reuse ids, and an
attacker can send another client's id: each request must still get its whole answer, and
dropping one must stop that one alone."""

from __future__ import annotations

import concurrent.futures

import pytest

from qa.common.figures import record
from qa.common.sse import iter_events

from .conftest import MODEL

pytestmark = pytest.mark.docker

TOKENS = 48
SHARED_ID = "shared-request-id"
STREAMS = 8  # half of them dropped after their second chunk


def stream(target, *, drop_after: int | None = None) -> dict:
    """One streamed completion with the shared id: what the client saw of it."""
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": TOKENS,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
            "temperature": 0}
    seen = {"chunks": 0, "text": "", "finish": None, "usage": None, "echoed": None}
    with target.openai() as client, client.stream(
            "POST", "/v1/completions", json=body,
            headers={"X-Request-Id": SHARED_ID}) as response:
        assert response.status_code == 200, response.read()
        seen["echoed"] = response.headers.get("x-request-id")
        for event in iter_events(response):
            if event.done:
                break
            chunk = event.json()
            for choice in chunk.get("choices") or []:
                seen["chunks"] += 1
                seen["text"] += choice.get("text") or ""
                seen["finish"] = choice.get("finish_reason") or seen["finish"]
            seen["usage"] = chunk.get("usage") or seen["usage"]
            if drop_after is not None and seen["chunks"] >= drop_after:
                return seen  # the connection closes: the server sees a client that left
    return seen


def test_streams_sharing_an_id_each_get_their_whole_answer(target):
    with concurrent.futures.ThreadPoolExecutor(STREAMS) as pool:
        futures = [pool.submit(stream, target, drop_after=2 if i % 2 else None)
                   for i in range(STREAMS)]
        results = [f.result(timeout=300) for f in futures]
    kept = [r for i, r in enumerate(results) if i % 2 == 0]
    for r in results:
        assert r["echoed"] == SHARED_ID  # the client's id is echoed back
    for r in kept:
        assert r["usage"] is not None and r["usage"]["completion_tokens"] == TOKENS, r
        assert r["finish"] == "length", r
    record("request_id_collisions_streams", STREAMS, "streams",
           f"{STREAMS // 2} dropped after 2 chunks, each kept one got all {TOKENS} tokens")


def test_an_id_reused_after_a_drop_gets_the_whole_answer(target):
    dropped = stream(target, drop_after=1)
    assert dropped["chunks"] >= 1
    again = stream(target)
    assert again["usage"]["completion_tokens"] == TOKENS, again
    assert again["finish"] == "length"


def test_answers_to_one_id_have_ids_of_their_own(target):
    ids = set()
    with target.openai() as client:
        for _ in range(3):
            answer = client.post("/v1/completions", headers={"X-Request-Id": SHARED_ID},
                                 json={"model": MODEL, "prompt": "Hi", "max_tokens": 1})
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-request-id"] == SHARED_ID
            ids.add(answer.json()["id"])
    assert len(ids) == 3, ids

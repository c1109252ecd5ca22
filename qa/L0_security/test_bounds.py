"""One body must not stall the server: oversized, fanned-out and malformed bodies are
refused with a 4xx before any work, while the pod's health answers within a second
throughout and its memory stays where it was.

The figures (bodies tried, 5xx seen, the slowest health answer, memory growth) go to the
QA summary (qa/common/figures.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from qa.common.figures import record

from .conftest import MODEL, HealthWatch, memory_bytes

pytestmark = pytest.mark.docker

HEALTH_WITHIN_S = 1.0
# The memory a burst of refused bodies may leave behind: allocator slack, not the bodies.
MEMORY_GROWTH_MAX = 256 * 1024 * 1024
TOO_BIG = 11 * 1024 * 1024  # over the frontend's default --max-request-bytes (10 MiB)


def _chunks(data: bytes, size: int = 64 * 1024):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def hostile_bodies() -> list[tuple[str, str, dict, object, tuple[int, ...]]]:
    """(case, path, headers, content, the statuses allowed): each must be refused."""
    json_headers = {"Content-Type": "application/json"}

    def body(path: str, doc: dict, allowed=(400,)):
        return path, json_headers, json.dumps(doc).encode(), allowed

    big = b'{"model": "' + MODEL.encode() + b'", "prompt": "' + b"a" * TOO_BIG + b'"}'
    return [
        ("50,000 prompts", *body("/v1/completions", {
            "model": MODEL, "prompt": ["hi"] * 50_000, "max_tokens": 1})),
        ("20 prompts x n=128", *body("/v1/completions", {
            "model": MODEL, "prompt": ["hi"] * 20, "n": 128, "max_tokens": 1})),
        ("50,000 token-id prompts", *body("/v1/completions", {
            "model": MODEL, "prompt": [[1, 2, 3]] * 50_000, "max_tokens": 1})),
        ("10,000 embeddings inputs", *body("/v1/embeddings", {
            "model": MODEL, "input": ["hi"] * 10_000}, (400, 404))),
        ("n=1000", *body("/v1/chat/completions", {
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 1000})),
        ("max_tokens=10^12", *body("/v1/completions", {
            "model": MODEL, "prompt": "hi", "max_tokens": 10 ** 12})),
        ("11 MiB with Content-Length", "/v1/completions", json_headers, big, (413,)),
        ("11 MiB chunked", "/v1/completions", json_headers, _chunks(big), (413,)),
        ("100,000 nested arrays", "/v1/completions", json_headers,
         b'{"model": "x", "prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", (400, 422)),
        ("not JSON", "/v1/chat/completions", json_headers, b"{\"model\": ", (400, 422)),
        ("a lone surrogate in instructions", *body("/v1/responses", {
            "model": MODEL, "input": "hi", "instructions": "\ud800", "max_output_tokens": 4})),
    ]


def test_hostile_bodies_are_refused_while_health_answers(target):
    url = target.url("openai")
    before = memory_bytes(target.server)
    refused, server_errors = 0, []
    with HealthWatch(url + "/health/ready") as health, target.openai(timeout=120) as client:
        for _ in range(3):  # a burst, not one try: what one body leaves, three leave thrice
            for case, path, headers, content, allowed in hostile_bodies():
                answer = client.post(path, content=content, headers=headers)
                if answer.status_code >= 500:
                    server_errors.append(f"{case}: {answer.status_code} {answer.text[:200]}")
                assert answer.status_code in allowed, \
                    f"{case}: {answer.status_code} {answer.text[:300]}"
                assert answer.headers["content-type"].startswith("application/json"), case
                error = answer.json()["error"]
                assert error["message"] and "Traceback" not in error["message"], case
                refused += 1
    grown = memory_bytes(target.server) - before
    record("hostile_bodies_refused", refused, "bodies")
    record("hostile_bodies_5xx", len(server_errors), "answers")
    record("hostile_bodies_slowest_health_s", round(health.slowest, 3), "s",
           f"{health.answers} answers of /health/ready while the bodies were sent")
    record("hostile_bodies_memory_growth", grown, "bytes")
    assert not server_errors
    assert not health.failures, health.failures
    assert health.slowest < HEALTH_WITHIN_S, f"/health/ready took {health.slowest:.2f} s"
    assert grown < MEMORY_GROWTH_MAX, f"the pod's memory grew by {grown} bytes"


def test_the_largest_batch_allowed_is_served_while_health_answers(target):
    """The bound itself: 512 prompts in one body are tokenized off the event loop and
    answered, and health keeps answering meanwhile."""
    body = {"model": MODEL, "prompt": [f"prompt number {i}" for i in range(512)],
            "max_tokens": 1}
    with HealthWatch(target.url("openai") + "/health/ready") as health, \
            target.openai(timeout=300) as client:
        answer = client.post("/v1/completions", json=body)
    assert answer.status_code == 200, answer.text[:500]
    assert len(answer.json()["choices"]) == 512
    record("batch_512_slowest_health_s", round(health.slowest, 3), "s")
    assert not health.failures, health.failures
    assert health.slowest < HEALTH_WITHIN_S, f"/health/ready took {health.slowest:.2f} s"


def test_a_forged_log_line_stays_on_its_line(target):
    """A percent-encoded line break in a path must not start a line of the access log."""
    marker = "FORGED-LOG-LINE"
    httpx.get(target.url("openai") + f"/v1/models%0a{marker}%0d%0a{marker}",
              headers={"Authorization": f"Bearer {target.api_key}"}, timeout=30)
    log = target.server.logs(tail=400)
    assert marker in log, "the request is not in the access log"
    assert not any(line.startswith(marker) for line in log.splitlines()), log[-2000:]

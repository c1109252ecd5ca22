"""Request ids, limits, tokenizer endpoints, tools, reasoning and priority on the real
stack, through the official `openai` client and raw HTTP.  Assertions are about
structure, counts and conformance, never about what the random tiny model writes."""

from __future__ import annotations

import time
import uuid

import pytest

from .conftest import MODEL

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MESSAGES = [{"role": "user", "content": "What is the weather like today?"}]


def _wait_for(read, needle: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = read()
        if needle in text or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


def test_request_id_is_echoed_and_names_the_request_in_every_log(stack, oai):
    rid = f"trace-{uuid.uuid4().hex[:8]}"
    raw = oai.chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, max_tokens=2, extra_headers={"X-Request-Id": rid})
    assert raw.headers["x-request-id"] == rid
    assert raw.parse().id == f"chatcmpl-{rid}"
    if hasattr(stack.triton, "logs"):
        # vLLM (enable_log_requests) logs the backend's id for it: the Triton id, then a suffix.
        assert f"Added request {rid}-" in _wait_for(lambda: stack.triton.logs, rid)
    if stack.frontend is not None:
        assert rid in _wait_for(lambda: stack.frontend.log, rid)
    made = oai.completions.with_raw_response.create(model=MODEL, prompt="x", max_tokens=1)
    assert len(made.headers["x-request-id"]) == 32

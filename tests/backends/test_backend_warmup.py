"""triton_vllm_backend/stub/warmup.py: the generation initialize() runs before ready."""

from __future__ import annotations

import asyncio

import pytest
from triton_vllm_backend.stub import warmup


class Logger:
    """A stat logger, as far as the warm-up touches it."""

    def __init__(self):
        self.paused = False


class Engine:
    def __init__(self, loggers, fail=False):
        self.loggers, self.fail = loggers, fail
        self.requests: list[tuple[dict, object, str]] = []
        self.paused_at_steps: list[bool] = []

    async def generate(self, prompt, sampling, request_id):
        self.requests.append((prompt, sampling, request_id))
        for _ in range(warmup.MAX_TOKENS):
            self.paused_at_steps.append(all(lg.paused for lg in self.loggers))
            if self.fail:
                raise RuntimeError("engine died")
            yield object()


def test_one_generation_runs_with_the_loggers_paused_and_resumes_them():
    loggers = [Logger(), Logger()]
    engine = Engine(loggers)
    took = asyncio.run(warmup.generate_once(engine, "sampling", warmup.prompt(True), loggers))
    assert took >= 0
    assert engine.requests == [({"prompt": "Hello"}, "sampling", warmup.REQUEST_ID)]
    assert engine.paused_at_steps == [True, True]
    assert not any(lg.paused for lg in loggers)


def test_a_failed_warm_up_resumes_the_loggers_and_raises():
    loggers = [Logger()]
    with pytest.raises(RuntimeError, match="engine died"):
        asyncio.run(warmup.generate_once(Engine(loggers, fail=True), None,
                                         warmup.prompt(True), loggers))
    assert not loggers[0].paused


def test_an_engine_without_a_tokenizer_gets_token_ids():
    assert warmup.prompt(False) == {"prompt_token_ids": warmup.PROMPT_TOKENS}


def test_a_warm_up_cut_by_its_timeout_resumes_the_loggers():
    class Hanging:
        async def generate(self, prompt, sampling, request_id):
            await asyncio.Event().wait()
            yield object()

    loggers = [Logger()]
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(asyncio.wait_for(
            warmup.generate_once(Hanging(), None, warmup.prompt(True), loggers), 0.05))
    assert not loggers[0].paused

"""lean_engine.py against vLLM's own stat logger classes and envs module (installed here)."""

from __future__ import annotations

import types

import pytest
from triton_vllm_backend.stub import lean_engine

loggers = pytest.importorskip("vllm.v1.metrics.loggers")


class Manager:  # vLLM's StatLoggerManager, as far as lean_engine looks into it
    def __init__(self, stat_loggers):
        self.stat_loggers = stat_loggers


def bare(cls):
    """An instance of a vLLM logger class without its constructor (it wants a config)."""
    return object.__new__(cls)


def test_vllms_unread_prometheus_logger_goes_and_the_others_stay():
    # The backend's own logger (any object), vLLM's text log, vLLM's Prometheus logger.
    ours, text, prom = object(), bare(loggers.LoggingStatLogger), bare(loggers.PrometheusStatLogger)
    engine = types.SimpleNamespace(logger_manager=Manager([ours, text, prom]))
    assert lean_engine.drop_unread_prometheus_logger(engine) == 1
    assert engine.logger_manager.stat_loggers == [ours, text]


def test_an_engine_without_statistics_has_nothing_to_drop():
    assert lean_engine.drop_unread_prometheus_logger(types.SimpleNamespace(
        logger_manager=None)) == 0


def test_vllms_envs_are_read_once_after_caching(monkeypatch):
    envs = pytest.importorskip("vllm.envs")
    monkeypatch.setenv("VLLM_COMPUTE_NANS_IN_LOGITS", "0")
    try:
        assert lean_engine.cache_vllm_envs(envs)
        monkeypatch.setenv("VLLM_COMPUTE_NANS_IN_LOGITS", "1")
        assert envs.VLLM_COMPUTE_NANS_IN_LOGITS is False  # the cached value, no getenv
    finally:
        envs.disable_envs_cache()
    assert envs.VLLM_COMPUTE_NANS_IN_LOGITS is True


def test_a_vllm_without_the_envs_cache_is_left_as_it_is():
    assert lean_engine.cache_vllm_envs(types.SimpleNamespace()) is False

"""triton_vllm_backend/metrics.py against the fake stub module: which series it makes, and
how many metric calls (each a round trip from the stub to tritonserver) the engine's
statistics cost.  vLLM's stat logger base class is stood in for; the real engine feeds
these series in qa/L0_backend_vllm."""

from __future__ import annotations

import importlib.util
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import fake_pb_utils as pb
import pytest

METRICS_PY = (Path(__file__).resolve().parents[2] / "backends" / "vllm" / "triton_vllm_backend"
              / "metrics.py")
LABELS = {"model": "m", "version": "1"}


@pytest.fixture
def metrics(monkeypatch):
    loggers = types.ModuleType("vllm.v1.metrics.loggers")
    loggers.StatLoggerBase = type("StatLoggerBase", (), {})
    for name in ("vllm", "vllm.v1", "vllm.v1.metrics"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.v1.metrics.loggers", loggers)
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    monkeypatch.setattr(pb.MetricFamily, "made", {})
    spec = importlib.util.spec_from_file_location("metrics_under_test", METRICS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Finished:  # vLLM's FinishedRequestStats
    e2e_latency: float
    num_prompt_tokens: int
    num_generation_tokens: int
    mean_time_per_output_token: float


@dataclass
class Iteration:  # vLLM's IterationStats
    num_prompt_tokens: int = 0
    num_generation_tokens: int = 0
    time_to_first_tokens_iter: list = field(default_factory=list)
    inter_token_latencies_iter: list = field(default_factory=list)
    n_params_iter: list = field(default_factory=list)
    finished_requests: list = field(default_factory=list)


@dataclass
class Scheduler:  # vLLM's SchedulerStats
    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    kv_cache_usage: float = 0.0


VLLM_CONFIG = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=2048))


def calls(name: str) -> list[tuple[str, float]]:
    [metric] = pb.MetricFamily.made[name].metrics
    return metric.calls


def run_requests(logger, streams: int, tokens: int) -> None:
    """`streams` requests of `tokens` tokens each, one engine step per token."""
    logger.record(Scheduler(streams, 0, 0.1), Iteration(
        num_prompt_tokens=5 * streams, num_generation_tokens=streams,
        time_to_first_tokens_iter=[0.02] * streams, n_params_iter=[1] * streams))
    for step in range(1, tokens):
        last = step == tokens - 1
        logger.record(Scheduler(0 if last else streams, 0, 0.1), Iteration(
            num_generation_tokens=streams, inter_token_latencies_iter=[0.004] * streams,
            finished_requests=[Finished(0.5, 5, tokens, 0.004)] * streams if last else []))
    logger.finalize()


def test_the_default_set_has_no_per_token_histogram(metrics):
    metrics.TritonMetrics(LABELS, 2048)
    made = pb.MetricFamily.made
    assert "vllm:time_per_output_token_seconds" not in made
    request_tpot = made["vllm:request_time_per_output_token_seconds"]
    assert request_tpot.kind == pb.MetricFamily.HISTOGRAM
    assert request_tpot.metrics[0].labels == LABELS
    assert {"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
            "vllm:num_requests_running", "vllm:generation_tokens_total"} <= made.keys()


def test_per_token_adds_the_inter_token_latency_histogram(metrics):
    metrics.TritonMetrics(LABELS, 2048, per_token=True)
    assert pb.MetricFamily.made["vllm:time_per_output_token_seconds"].metrics[0].buckets


def test_metric_calls_grow_with_requests_not_tokens(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0.2)
    run_requests(logger, streams=8, tokens=200)
    # Every figure is exact: 1,600 tokens, each request's mean time per token once.
    assert sum(v for _, v in calls("vllm:generation_tokens_total")) == 1600
    assert sum(v for _, v in calls("vllm:prompt_tokens_total")) == 40
    assert calls("vllm:request_time_per_output_token_seconds") == [("observe", 0.004)] * 8
    assert calls("vllm:time_to_first_token_seconds") == [("observe", 0.02)] * 8
    assert calls("vllm:request_generation_tokens") == [("observe", 200)] * 8
    # 200 engine steps queued within one flush interval go out as one update, and a gauge
    # that did not change is not set again.
    assert len(calls("vllm:generation_tokens_total")) == 1
    assert calls("vllm:kv_cache_usage_perc") == [("set", 0.1)]
    assert calls("vllm:num_requests_running")[-1] == ("set", 0)


def test_per_token_observes_every_inter_token_latency(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, per_token=True, flush_interval=0)
    run_requests(logger, streams=4, tokens=10)
    assert calls("vllm:time_per_output_token_seconds") == [("observe", 0.004)] * 36


def test_a_steady_engine_is_flushed_at_most_once_an_interval(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0.1)
    started = time.monotonic()
    while time.monotonic() - started < 0.5:
        logger.record(None, Iteration(num_generation_tokens=1))
        time.sleep(0.001)
    logger.finalize()
    increments = calls("vllm:generation_tokens_total")
    assert 2 <= len(increments) <= 7, increments
    assert sum(v for _, v in increments) > 100

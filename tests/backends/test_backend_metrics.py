"""triton_vllm_backend/stub/metrics.py against the fake stub module: which series it makes, and
how many metric calls (each a round trip from the stub to tritonserver) the engine's
statistics cost.  vLLM's stat logger base class is stood in for; the real engine feeds
these series in qa/L0_backend_vllm."""

from __future__ import annotations

import ast
import enum
import importlib.util
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import fake_pb_utils as pb
import pytest

METRICS_PY = (Path(__file__).resolve().parents[2] / "backends" / "vllm" / "triton_vllm_backend"
              / "stub" / "metrics.py")
LABELS = {"model": "m", "version": "1", "model_name": "m"}


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


class Reason(enum.IntEnum):  # vLLM's FinishReason: an int that prints as its name
    STOP = 0
    LENGTH = 1

    def __str__(self):
        return self.name.lower()


@dataclass
class Finished:  # vLLM's FinishedRequestStats
    e2e_latency: float
    num_prompt_tokens: int
    num_generation_tokens: int
    mean_time_per_output_token: float
    finish_reason: Reason = Reason.LENGTH
    queued_time: float = 0.01
    prefill_time: float = 0.02
    inference_time: float = 0.4
    decode_time: float = 0.38


@dataclass
class Iteration:  # vLLM's IterationStats
    num_prompt_tokens: int = 0
    num_generation_tokens: int = 0
    time_to_first_tokens_iter: list = field(default_factory=list)
    inter_token_latencies_iter: list = field(default_factory=list)
    n_params_iter: list = field(default_factory=list)
    finished_requests: list = field(default_factory=list)
    num_preempted_reqs: int = 0


@dataclass
class NewerFinished(Finished):  # vLLM 0.32's FinishedRequestStats adds these
    num_preemptions: int = 0
    max_tokens_param: int | None = None
    num_cached_tokens: int = 0


@dataclass
class PromptTokens:  # vLLM 0.32's PromptTokenStats
    computed: int = 0
    cached_tokens: int = 0


@dataclass
class NewerIteration(Iteration):
    max_num_generation_tokens_iter: list = field(default_factory=list)
    prompt_token_stats: PromptTokens = field(default_factory=PromptTokens)


@dataclass
class PrefixCache:  # vLLM's PrefixCacheStats
    queries: int = 0
    hits: int = 0


@dataclass
class Scheduler:  # vLLM's SchedulerStats
    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    kv_cache_usage: float = 0.0
    prefix_cache_stats: PrefixCache = field(default_factory=PrefixCache)


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


def test_a_paused_logger_records_nothing(metrics):
    # The backend's warm-up generation (warmup.py) is no client's request.
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0)
    logger.paused = True
    logger.record(Scheduler(1, 0, 0.1), Iteration(
        num_generation_tokens=2, finished_requests=[Finished(0.5, 5, 2, 0.004)]))
    logger.paused = False
    run_requests(logger, streams=1, tokens=4)
    assert sum(v for _, v in calls("vllm:generation_tokens_total")) == 4
    assert calls("vllm:request_generation_tokens") == [("observe", 4)]


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


def test_every_series_carries_model_name_beside_model_and_version(metrics):
    metrics.TritonMetrics(metrics.series_labels("m", 1), 2048, per_token=True)
    for family in pb.MetricFamily.made.values():
        for metric in family.metrics:
            assert {k: v for k, v in metric.labels.items()
                    if k not in ("finished_reason", "le")} == LABELS


def test_request_success_has_a_series_per_finish_reason_before_any_request(metrics):
    metrics.TritonMetrics(LABELS, 2048)
    family = pb.MetricFamily.made["vllm:request_success_total"]
    assert family.kind == pb.MetricFamily.COUNTER
    assert sorted(m.labels["finished_reason"] for m in family.metrics) == sorted(
        metrics.FINISH_REASONS)
    assert all(m.calls == [] for m in family.metrics)


def reason_calls(reason: str) -> list:
    family = pb.MetricFamily.made["vllm:request_success_total"]
    [metric] = [m for m in family.metrics if m.labels["finished_reason"] == reason]
    return metric.calls


def test_request_success_counts_each_reason_once_a_flush(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0.2)
    for reason in [Reason.STOP, Reason.LENGTH, Reason.LENGTH, Reason.STOP, Reason.LENGTH]:
        logger.record(None, Iteration(finished_requests=[Finished(0.5, 5, 3, 0.01, reason)]))
    logger.finalize()
    assert reason_calls("stop") == [("increment", 2)]
    assert reason_calls("length") == [("increment", 3)]
    assert reason_calls("abort") == []


def test_phase_times_preemptions_and_prefix_cache_are_per_request_or_per_flush(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0.2)
    for step in range(100):
        logger.record(Scheduler(4, 1, 0.5, PrefixCache(queries=16, hits=8)), Iteration(
            num_generation_tokens=4, num_preempted_reqs=1 if step == 50 else 0,
            finished_requests=[Finished(0.5, 5, 100, 0.004)] * 4 if step == 99 else []))
    logger.finalize()
    assert calls("vllm:request_queue_time_seconds") == [("observe", 0.01)] * 4
    assert calls("vllm:request_prefill_time_seconds") == [("observe", 0.02)] * 4
    assert calls("vllm:request_inference_time_seconds") == [("observe", 0.4)] * 4
    assert calls("vllm:request_decode_time_seconds") == [("observe", 0.38)] * 4
    assert calls("vllm:num_preemptions_total") == [("increment", 1)]
    assert calls("vllm:prefix_cache_queries_total") == [("increment", 1600)]
    assert calls("vllm:prefix_cache_hits_total") == [("increment", 800)]


def batched(name: str) -> dict:
    """What a BatchedHistogram's counters add up to: {le: count}, sum and count."""
    def total(series):
        return sum(v for _, v in series.calls)
    buckets = {m.labels["le"]: total(m) for m in pb.MetricFamily.made[f"{name}_bucket"].metrics}
    [sum_series] = pb.MetricFamily.made[f"{name}_sum"].metrics
    [count_series] = pb.MetricFamily.made[f"{name}_count"].metrics
    return {"buckets": buckets, "sum": total(sum_series), "count": total(count_series)}


def test_inter_token_latency_is_every_gap_batched_into_counters(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0)
    run_requests(logger, streams=4, tokens=10)
    itl = batched("vllm:inter_token_latency_seconds")
    # 36 gaps of 4 ms, all at or below the first bound; `le` written as vLLM's server
    # writes it.
    assert itl["count"] == 36 and itl["sum"] == pytest.approx(0.144)
    assert itl["buckets"]["0.01"] == 36 and itl["buckets"]["+Inf"] == 36
    assert list(itl["buckets"])[:3] == ["0.01", "0.025", "0.05"]
    assert "1.0" in itl["buckets"] and "1" not in itl["buckets"]
    for family in ("bucket", "sum", "count"):
        made = pb.MetricFamily.made[f"vllm:inter_token_latency_seconds_{family}"]
        assert made.kind == pb.MetricFamily.COUNTER


def test_iteration_tokens_counts_each_step_batched(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0)
    run_requests(logger, streams=4, tokens=10)
    steps = batched("vllm:iteration_tokens_total")
    # The fake's steps have no prompt_token_stats: all prompt tokens count as computed:
    # 24 tokens in the first step, 4 in each of the other 9.
    assert steps["count"] == 10 and steps["sum"] == 24 + 4 * 9
    assert steps["buckets"]["1.0"] == 0 and steps["buckets"]["8.0"] == 9
    assert steps["buckets"]["32.0"] == 10


def test_a_batched_histogram_costs_calls_per_interval_not_per_value(metrics, monkeypatch):
    monkeypatch.setattr(metrics, "BATCH_INTERVAL", 0.2)
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0.01)
    started = time.monotonic()
    while time.monotonic() - started < 0.5:
        logger.record(None, Iteration(num_generation_tokens=16,
                                      inter_token_latencies_iter=[0.03, 0.2] * 8))
        time.sleep(0.001)
    # Values that came after the last push go out when due, with no further step.
    time.sleep(0.4)
    family = pb.MetricFamily.made["vllm:inter_token_latency_seconds_bucket"]
    pushes = len(pb.MetricFamily.made["vllm:inter_token_latency_seconds_count"].metrics[0].calls)
    itl = batched("vllm:inter_token_latency_seconds")
    assert 2 <= pushes <= 5, pushes
    # Each push: one increment per bucket that holds values, at most every bucket.
    assert sum(len(m.calls) for m in family.metrics) <= pushes * len(family.metrics)
    assert itl["count"] > 1000 and itl["buckets"]["0.05"] == itl["count"] / 2
    logger.finalize()


def test_the_newer_per_request_series_once_a_request(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0)
    finished = [NewerFinished(0.5, 12, 7, 0.004, num_preemptions=1, max_tokens_param=7,
                              num_cached_tokens=8),
                NewerFinished(0.5, 12, 3, 0.004, max_tokens_param=None)]
    logger.record(None, NewerIteration(num_generation_tokens=2, finished_requests=finished,
                                       max_num_generation_tokens_iter=[7, 3],
                                       prompt_token_stats=PromptTokens(computed=4,
                                                                       cached_tokens=8)))
    logger.finalize()
    assert calls("vllm:request_max_num_generation_tokens") == [("observe", 7), ("observe", 3)]
    # Only a request that set max_tokens, as vLLM's server.
    assert calls("vllm:request_params_max_tokens") == [("observe", 7)]
    assert calls("vllm:request_num_preemptions") == [("observe", 1), ("observe", 0)]
    assert calls("vllm:request_prefill_kv_computed_tokens") == [("observe", 4),
                                                                ("observe", 12)]
    assert calls("vllm:prompt_tokens_cached_total") == [("increment", 8)]


def test_what_an_older_vllm_does_not_count_is_left_out(metrics):
    logger = metrics.TritonStatLogger(LABELS, VLLM_CONFIG, flush_interval=0)
    run_requests(logger, streams=2, tokens=3)
    for name in ("vllm:request_num_preemptions", "vllm:request_prefill_kv_computed_tokens",
                 "vllm:prompt_tokens_cached_total", "vllm:request_max_num_generation_tokens"):
        assert calls(name) == [], name


# --------------------------------------------- agreement with vLLM's own Prometheus logger
def _find_vllm() -> Path | None:
    spec = importlib.util.find_spec("vllm")
    return None if spec is None or spec.origin is None else Path(spec.origin).parent


# Found at import, before the `metrics` fixture stands fakes in for vllm's modules.
INSTALLED_VLLM = _find_vllm()


def _installed_vllm_metrics_dir() -> Path:
    if INSTALLED_VLLM is None:
        pytest.skip("vLLM is not installed in this environment")
    return INSTALLED_VLLM / "v1" / "metrics"


def vllm_server_series(max_model_len: int) -> dict[str, tuple]:
    """Every series of vLLM's PrometheusStatLogger, read from the installed vLLM's sources:
    exposed name -> (kind, description, buckets)."""
    folder = _installed_vllm_metrics_dir()
    spec = importlib.util.spec_from_file_location("vllm_buckets", folder / "buckets.py")
    buckets_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(buckets_module)
    tree = ast.parse((folder / "loggers.py").read_text())
    families = {}  # variable -> bucket family, from `x = histogram_buckets("family", ...)`
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "histogram_buckets"):
            families[node.targets[0].id] = node.value.args[0].value
    series = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("_counter_cls", "_gauge_cls", "_histogram_cls")):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if "name" not in kw or not isinstance(kw["name"], ast.Constant):
            continue
        kind = node.func.attr[1:-4]
        name = kw["name"].value + ("_total" if kind == "counter" else "")
        buckets = None
        if kind == "histogram" and isinstance(kw.get("buckets"), ast.Name):
            buckets = list(buckets_module.histogram_buckets(
                families[kw["buckets"].id], max_model_len=max_model_len))
        series[name] = (kind, ast.literal_eval(kw["documentation"]), buckets)
    return series


def test_every_series_is_vllm_servers_own_name_type_buckets_and_meaning(metrics):
    theirs = vllm_server_series(2048)
    ours = {name: (kind, doc, buckets)
            for kind, name, doc, buckets in metrics.specs(2048).values()}
    # The per-token histogram keeps the name NVIDIA's vLLM backend gave it; vLLM's server
    # has the same observations as vllm:inter_token_latency_seconds.
    renamed = {"vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds"}
    for name, (kind, doc, buckets) in ours.items():
        their_kind, their_doc, their_buckets = theirs[renamed.get(name, name)]
        assert kind == their_kind, name
        if name not in renamed:
            assert doc == their_doc, name
        assert buckets == their_buckets, name


def test_the_finish_reasons_are_vllms(metrics):
    folder = _installed_vllm_metrics_dir().parent / "engine"
    tree = ast.parse((folder / "__init__.py").read_text())
    [strings] = [ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", None) == "FINISH_REASON_STRINGS"]
    assert metrics.FINISH_REASONS == strings


KINDS = ("internal", "invalid_argument", "unavailable")


def test_every_error_kind_has_a_series_at_zero_and_the_engine_starts_alive(metrics):
    metrics.ServingMetrics(LABELS, KINDS)
    errors = pb.MetricFamily.made[metrics.ERRORS_SERIES]
    assert errors.kind == pb.MetricFamily.COUNTER
    assert sorted(m.labels.pop("kind") for m in errors.metrics) == list(KINDS)
    assert all(m.labels == LABELS and m.calls == [] for m in errors.metrics)
    assert calls(metrics.HEALTHY_SERIES) == [("set", 1)]
    assert calls(metrics.DEATHS_SERIES) == []


def test_an_error_is_one_increment_of_its_kind_and_a_death_is_told_once(metrics):
    serving = metrics.ServingMetrics(LABELS, KINDS)
    serving.error("unavailable")
    serving.error("unavailable")
    serving.error("invalid_argument")
    serving.engine_died()
    by_kind = {m.labels["kind"]: m.calls for m in pb.MetricFamily.made[metrics.ERRORS_SERIES].metrics}
    assert by_kind == {"unavailable": [("increment", 1)] * 2,
                       "invalid_argument": [("increment", 1)], "internal": []}
    assert calls(metrics.HEALTHY_SERIES) == [("set", 1), ("set", 0)]
    assert calls(metrics.DEATHS_SERIES) == [("increment", 1)]


def test_the_backends_own_series_are_not_in_vllms_namespace(metrics):
    # vLLM's server has no such series: a dashboard written for it must not mistake them.
    theirs = vllm_server_series(2048)
    for name in (metrics.ERRORS_SERIES, metrics.HEALTHY_SERIES, metrics.DEATHS_SERIES):
        assert not name.startswith("vllm:") and name not in theirs

"""vLLM's engine statistics as Triton custom metrics, under vLLM's own names.

Every series carries `model_name` (the served name, the label vLLM's server and the
dashboards written for it select on) beside Triton's `model` and `version`.  Names,
types, buckets and meanings are vLLM's (`vllm/v1/metrics/loggers.py`,
`vllm/v1/metrics/buckets.py`; tests/backends checks them against the installed vLLM).

A vLLM stat logger receives the engine's statistics once per engine step.  Every Triton
metric update is a round trip from the Python stub to the server (tens of microseconds of
CPU on both sides), so what is updated, and how often, is the cost:

- `record()` only queues the numbers; one worker thread of our own applies them, off the
  engine's loop, at most every FLUSH_INTERVAL seconds, everything queued meanwhile merged
  into one update: per-step series cost a bounded number of calls a second however fast
  the engine steps.  Gauges are set only when their value changed; counters get one
  increment per flush.
- A Triton histogram takes one value per call, so a per-token histogram made of one costs
  a round trip per generated token: measured, a third of the serving CPU per streamed
  token.  Per-request histograms are Triton histograms.  The per-token inter-token
  latency (`vllm:inter_token_latency_seconds`) and the per-step
  `vllm:iteration_tokens_total` are BatchedHistograms: the counters Prometheus reads a
  histogram as, pushed at most once every BATCH_INTERVAL, so they cost a bounded number
  of calls a second too.  NVIDIA's vLLM backend's per-token histogram,
  `vllm:time_per_output_token_seconds`, a Triton histogram, stays opt-in (`per_token`).
"""

from __future__ import annotations

import bisect
import math
import queue
import threading
import time

import triton_python_backend_utils as pb_utils
from prometheus_client.utils import floatToGoString
from vllm.v1.metrics.loggers import StatLoggerBase

# Bucket bounds as vLLM's own Prometheus logger uses them (seconds, tokens).
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
INTER_TOKEN_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                       2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                           40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
ITERATION_TOKENS_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
N_BUCKETS = [1, 2, 5, 10, 20]
REQUEST_NUM_PREEMPTIONS_BUCKETS = [1, 2, 3, 4, 5, 10, 20]
# vLLM's finish reasons (FINISH_REASON_STRINGS), made up front so that each series exists
# at 0 before its first request: rate() and ratios over them then read 0, not nothing.
# A reason a later vLLM adds gets its series at its first request.
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


def token_buckets(max_model_len: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to max_model_len (vLLM's 1-2-5 series)."""
    buckets, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_model_len:
                return buckets
            buckets.append(float(value))
        exponent += 1


COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"
GAUGES = {"running", "waiting", "kv_cache_usage"}
PER_TOKEN = {"tpot"}
# Histograms observed per token or per engine step: kept as BatchedHistograms.
BATCHED = {"itl", "iteration_tokens"}
# Series keyed by a label value: the update carries {label value: increment}.
BY_REASON = "request_success"
# The backend's own series (ServingMetrics), beside vLLM's.
ERRORS_SERIES = "triton_vllm_request_errors_total"
HEALTHY_SERIES = "triton_vllm_engine_healthy"
DEATHS_SERIES = "triton_vllm_engine_deaths_total"
# Seconds between metric flushes: far below any scrape interval, and few enough calls.
FLUSH_INTERVAL = 0.1
# Seconds between pushes of a BatchedHistogram: each push is an increment per bucket.
BATCH_INTERVAL = 1.0


def specs(max_model_len: int) -> dict[str, tuple]:
    """Every series: key -> (kind, vLLM's name, vLLM's description, buckets)."""
    tokens = token_buckets(max_model_len)
    return {
        "running": (GAUGE, "vllm:num_requests_running",
                    "Number of requests in model execution batches.", None),
        "waiting": (GAUGE, "vllm:num_requests_waiting",
                    "Number of requests waiting to be processed.", None),
        "kv_cache_usage": (GAUGE, "vllm:kv_cache_usage_perc",
                           "KV-cache usage. 1 means 100 percent usage.", None),
        "prompt_tokens": (COUNTER, "vllm:prompt_tokens_total",
                          "Number of prefill tokens processed.", None),
        "generation_tokens": (COUNTER, "vllm:generation_tokens_total",
                              "Number of generation tokens processed.", None),
        "preemptions": (COUNTER, "vllm:num_preemptions_total",
                        "Cumulative number of preemption from the engine.", None),
        "prefix_cache_queries": (COUNTER, "vllm:prefix_cache_queries_total",
                                 "Prefix cache queries, in terms of number of queried "
                                 "tokens.", None),
        "prefix_cache_hits": (COUNTER, "vllm:prefix_cache_hits_total",
                              "Prefix cache hits, in terms of number of cached tokens.",
                              None),
        "prompt_tokens_cached": (COUNTER, "vllm:prompt_tokens_cached_total",
                                 "Number of cached prompt tokens (local + external).", None),
        BY_REASON: (COUNTER, "vllm:request_success_total",
                    "Count of successfully processed requests.", None),
        "ttft": (HISTOGRAM, "vllm:time_to_first_token_seconds",
                 "Histogram of time to first token in seconds.", TTFT_BUCKETS),
        "itl": (HISTOGRAM, "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.", INTER_TOKEN_BUCKETS),
        "tpot": (HISTOGRAM, "vllm:time_per_output_token_seconds",
                 "Histogram of time per output token in seconds.", INTER_TOKEN_BUCKETS),
        "request_tpot": (HISTOGRAM, "vllm:request_time_per_output_token_seconds",
                         "Histogram of time_per_output_token_seconds per request.",
                         INTER_TOKEN_BUCKETS),
        "e2e": (HISTOGRAM, "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS),
        "queue": (HISTOGRAM, "vllm:request_queue_time_seconds",
                  "Histogram of time spent in WAITING phase for request.",
                  REQUEST_LATENCY_BUCKETS),
        "inference": (HISTOGRAM, "vllm:request_inference_time_seconds",
                      "Histogram of time spent in RUNNING phase for request.",
                      REQUEST_LATENCY_BUCKETS),
        "prefill": (HISTOGRAM, "vllm:request_prefill_time_seconds",
                    "Histogram of time spent in PREFILL phase for request.",
                    REQUEST_LATENCY_BUCKETS),
        "decode": (HISTOGRAM, "vllm:request_decode_time_seconds",
                   "Histogram of time spent in DECODE phase for request.",
                   REQUEST_LATENCY_BUCKETS),
        "prompt_per_request": (HISTOGRAM, "vllm:request_prompt_tokens",
                               "Number of prefill tokens processed.", tokens),
        "generation_per_request": (HISTOGRAM, "vllm:request_generation_tokens",
                                   "Number of generation tokens processed.", tokens),
        "iteration_tokens": (HISTOGRAM, "vllm:iteration_tokens_total",
                             "Histogram of number of tokens per engine_step.",
                             ITERATION_TOKENS_BUCKETS),
        "max_generation_per_request": (
            HISTOGRAM, "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.", tokens),
        "n": (HISTOGRAM, "vllm:request_params_n",
              "Histogram of the n request parameter.", N_BUCKETS),
        "max_tokens": (HISTOGRAM, "vllm:request_params_max_tokens",
                       "Histogram of the max_tokens request parameter.", tokens),
        "preemptions_per_request": (
            HISTOGRAM, "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            REQUEST_NUM_PREEMPTIONS_BUCKETS),
        "prefill_computed_per_request": (
            HISTOGRAM, "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tokens),
    }


class BatchedHistogram:
    """A histogram kept as the counters Prometheus reads one as (`NAME_bucket` for each
    `le`, `NAME_sum`, `NAME_count`), pushed to tritonserver in batches: a push is one
    increment per bucket that moved, however many values fell in it.

    For values that come per token or per engine step, where a Triton histogram's call per
    value is the cost (see the module's docstring).  PromQL reads these series exactly as
    a histogram's (histogram_quantile over the buckets, rate of the sum over the count);
    the exposition's TYPE line says counter.  `le` is written as vLLM's server writes it
    (prometheus_client: "0.01", "1.0", "+Inf")."""

    def __init__(self, name: str, description: str, buckets: list, labels: dict[str, str]):
        counter = pb_utils.MetricFamily.COUNTER
        # Kept referenced: a family that is garbage-collected disappears.
        self._families = [pb_utils.MetricFamily(name=f"{name}_{part}", description=description,
                                                kind=counter)
                          for part in ("bucket", "sum", "count")]
        self._bounds = [float(b) for b in buckets]
        self._buckets = [self._families[0].Metric(labels={**labels, "le": floatToGoString(b)})
                         for b in [*self._bounds, math.inf]]
        self._sum = self._families[1].Metric(labels=labels)
        self._count = self._families[2].Metric(labels=labels)
        self._pending = [0] * len(self._buckets)  # values per bucket, not cumulative
        self._pending_sum = 0.0
        self.pending = 0  # values not pushed yet

    def add(self, values) -> None:
        for value in values:
            # A bucket counts the values at or below its bound.
            self._pending[bisect.bisect_left(self._bounds, value)] += 1
            self._pending_sum += value
            self.pending += 1

    def push(self) -> None:
        if not self.pending:
            return
        cumulative = 0
        for series, count in zip(self._buckets, self._pending, strict=True):
            cumulative += count
            if cumulative:
                series.increment(cumulative)
        if self._pending_sum:
            self._sum.increment(self._pending_sum)
        self._count.increment(cumulative)
        self._pending = [0] * len(self._buckets)
        self._pending_sum = 0.0
        self.pending = 0


class TritonMetrics:
    """The metric families and this model's labelled series in them."""

    def __init__(self, labels: dict[str, str], max_model_len: int, per_token: bool = False):
        self._labels = labels
        # Families are kept referenced: a family that is garbage-collected disappears.
        self._families: dict[str, object] = {}
        self.series: dict = {}
        self._gauge_values: dict[str, float] = {}
        kinds = {COUNTER: pb_utils.MetricFamily.COUNTER, GAUGE: pb_utils.MetricFamily.GAUGE,
                 HISTOGRAM: pb_utils.MetricFamily.HISTOGRAM}
        self._buckets: dict[str, list | None] = {}
        self._batched: dict[str, BatchedHistogram] = {}
        self._last_push = time.monotonic()
        for key, (kind, name, doc, buckets) in specs(max_model_len).items():
            if key in PER_TOKEN and not per_token:
                continue
            if key in BATCHED:
                self._batched[key] = BatchedHistogram(name, doc, buckets, labels)
                continue
            self._families[key] = pb_utils.MetricFamily(name=name, description=doc,
                                                        kind=kinds[kind])
            self._buckets[key] = buckets
            if key == BY_REASON:
                self.series[key] = {}
                for reason in FINISH_REASONS:
                    self._reason_series(reason)
            else:
                self.series[key] = self._make(key, labels)

    def _make(self, key: str, labels: dict[str, str]):
        buckets = self._buckets[key]
        if buckets is None:
            return self._families[key].Metric(labels=labels)
        return self._families[key].Metric(labels=labels, buckets=buckets)

    def _reason_series(self, reason: str):
        by_reason = self.series[BY_REASON]
        if reason not in by_reason:
            by_reason[reason] = self._make(BY_REASON, {**self._labels,
                                                       "finished_reason": reason})
        return by_reason[reason]

    def apply(self, update: dict) -> None:
        """Update the series; `update` maps series keys to a value (counters, gauges), a
        list of observations (histograms) or {finish reason: count}."""
        for key, value in update.items():
            if key in self._batched:
                self._batched[key].add(value)
                continue
            if key not in self.series:  # a per-token series left out
                continue
            metric = self.series[key]
            if key in GAUGES:
                if self._gauge_values.get(key) != value:
                    metric.set(value)
                    self._gauge_values[key] = value
            elif key == BY_REASON:
                for reason, count in value.items():
                    self._reason_series(reason).increment(count)
            elif isinstance(value, list):
                for v in value:
                    metric.observe(v)
            elif value:
                metric.increment(value)
        if self.batched_due() == 0:
            self.push_batched()

    def batched_due(self) -> float | None:
        """Seconds until the BatchedHistograms' values are due out; None if none wait."""
        if not any(h.pending for h in self._batched.values()):
            return None
        return max(0.0, self._last_push + BATCH_INTERVAL - time.monotonic())

    def push_batched(self) -> None:
        for histogram in self._batched.values():
            histogram.push()
        self._last_push = time.monotonic()

    def close(self) -> None:
        self.push_batched()
        self.series.clear()
        self._families.clear()
        self._batched.clear()


def merge_updates(updates: list[dict]) -> dict:
    """One update equivalent to `updates` applied in order: counters add up,
    observations are concatenated, gauges keep their last value."""
    merged: dict = {}
    for update in updates:
        for key, value in update.items():
            if key in GAUGES:
                merged[key] = value
            elif isinstance(value, list):
                merged.setdefault(key, []).extend(value)
            elif isinstance(value, dict):
                into = merged.setdefault(key, {})
                for label, count in value.items():
                    into[label] = into.get(label, 0) + count
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


def iteration_update(iteration_stats, per_token: bool) -> dict:
    """The series one engine step's IterationStats feeds, as an update."""
    finished = iteration_stats.finished_requests
    reasons: dict[str, int] = {}
    for r in finished:
        reason = str(r.finish_reason)
        reasons[reason] = reasons.get(reason, 0) + 1
    update = {
        "prompt_tokens": iteration_stats.num_prompt_tokens,
        "generation_tokens": iteration_stats.num_generation_tokens,
        "preemptions": getattr(iteration_stats, "num_preempted_reqs", 0),
        "ttft": list(iteration_stats.time_to_first_tokens_iter),
        "n": list(iteration_stats.n_params_iter),
        "e2e": [r.e2e_latency for r in finished],
        "queue": [r.queued_time for r in finished],
        "inference": [r.inference_time for r in finished],
        "prefill": [r.prefill_time for r in finished],
        "decode": [r.decode_time for r in finished],
        # vLLM's own server observes it for every request (0 for a single token).
        "request_tpot": [r.mean_time_per_output_token for r in finished],
        "prompt_per_request": [r.num_prompt_tokens for r in finished],
        "generation_per_request": [r.num_generation_tokens for r in finished],
        "itl": list(iteration_stats.inter_token_latencies_iter),
        # Per request too: the most tokens one of its choices generated.
        "max_generation_per_request": list(
            getattr(iteration_stats, "max_num_generation_tokens_iter", ())),
        # As vLLM's server: only requests that set max_tokens.
        "max_tokens": [r.max_tokens_param for r in finished
                       if getattr(r, "max_tokens_param", None)],
    }
    # What older vLLMs (the GPU image's) do not count is left out, not reported as 0.
    preemptions = [getattr(r, "num_preemptions", None) for r in finished]
    if None not in preemptions:
        update["preemptions_per_request"] = preemptions
    cached = [getattr(r, "num_cached_tokens", None) for r in finished]
    if None not in cached:
        update["prefill_computed_per_request"] = [
            r.num_prompt_tokens - max(c, 0) for r, c in zip(finished, cached, strict=True)]
    # vLLM counts the step's computed prompt tokens (cached ones are no work).
    prompt = getattr(iteration_stats, "prompt_token_stats", None)
    computed = prompt.computed if prompt is not None else iteration_stats.num_prompt_tokens
    update["iteration_tokens"] = [computed + iteration_stats.num_generation_tokens]
    cached_prompt = getattr(prompt, "cached_tokens", None)
    if cached_prompt is not None:
        update["prompt_tokens_cached"] = cached_prompt
    if reasons:
        update[BY_REASON] = reasons
    if per_token:
        update["tpot"] = list(iteration_stats.inter_token_latencies_iter)
    return update


def scheduler_update(scheduler_stats) -> dict:
    """The series one engine step's SchedulerStats feeds, as an update."""
    update = {"running": scheduler_stats.num_running_reqs,
              "waiting": scheduler_stats.num_waiting_reqs,
              "kv_cache_usage": scheduler_stats.kv_cache_usage}
    prefix = getattr(scheduler_stats, "prefix_cache_stats", None)
    if prefix is not None:
        update.update(prefix_cache_queries=prefix.queries, prefix_cache_hits=prefix.hits)
    return update


class TritonStatLogger(StatLoggerBase):
    """A vLLM stat logger that forwards to TritonMetrics through a worker thread."""

    def __init__(self, labels: dict[str, str], vllm_config, engine_index: int = 0,
                 per_token: bool = False, flush_interval: float = FLUSH_INTERVAL):
        self._metrics = TritonMetrics(labels, vllm_config.model_config.max_model_len,
                                      per_token)
        self._per_token = per_token
        self._flush_interval = flush_interval
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="vllm-metrics", daemon=True)
        self._thread.start()
        # Set while the backend's own warm-up generation runs (warmup.py).
        self.paused = False

    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx=0):
        if self.paused:
            return
        update = {}
        if scheduler_stats is not None:
            update.update(scheduler_update(scheduler_stats))
        if iteration_stats is not None:
            update.update(iteration_update(iteration_stats, self._per_token))
        if update:
            self._queue.put(update)

    def log_engine_initialized(self):
        pass

    def _work(self):
        while True:
            try:
                # Batched values still waiting go out when due, the engine busy or not.
                updates = [self._queue.get(timeout=self._metrics.batched_due())]
            except queue.Empty:
                self._metrics.push_batched()
                continue
            # Everything queued meanwhile goes out as one update: a busy engine makes
            # hundreds of steps a second, and each metric call is a round trip to the server.
            if updates[0] is not None:
                time.sleep(self._flush_interval)
            while not self._queue.empty():
                updates.append(self._queue.get_nowait())
            stop = None in updates
            merged = merge_updates([u for u in updates if u is not None])
            if merged:
                self._metrics.apply(merged)
            if stop:
                return

    def finalize(self):
        """Apply what is queued, stop the worker, and drop the metric families now.

        A family left to the interpreter's final garbage collection is destroyed after
        the stub's shared memory is gone, and crashes the stub on its way out."""
        self._queue.put(None)
        self._thread.join(timeout=10)
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None


class ServingMetrics:
    """What the backend itself knows and vLLM's statistics do not: the requests it
    answered with an error, by kind (errors.py), and whether its engine is alive.

    vLLM counts only the requests its engine finished; one refused before it (a bad
    parameter) or failed at once on a dead engine is in no vLLM series, and Triton
    counts a decoupled model's error response as a success.  Without these, an error
    ratio reads 0 while every request fails.  One metric call per error, none per token.
    """

    def __init__(self, labels: dict[str, str], kinds):
        counter, gauge = pb_utils.MetricFamily.COUNTER, pb_utils.MetricFamily.GAUGE
        self._families = {
            "errors": pb_utils.MetricFamily(
                name=ERRORS_SERIES, kind=counter,
                description="Requests the vLLM backend answered with an error, by kind."),
            "healthy": pb_utils.MetricFamily(
                name=HEALTHY_SERIES, kind=gauge,
                description="1 while the model's vLLM engine runs, 0 once it died."),
            "deaths": pb_utils.MetricFamily(
                name=DEATHS_SERIES, kind=counter,
                description="Times the model's vLLM engine died."),
        }
        # Every kind's series exists at 0 from the start: rate() over it then reads 0.
        self._errors = {kind: self._families["errors"].Metric(labels={**labels, "kind": kind})
                        for kind in sorted(kinds)}
        self._healthy = self._families["healthy"].Metric(labels=labels)
        self._deaths = self._families["deaths"].Metric(labels=labels)
        self._healthy.set(1)

    def error(self, kind: str) -> None:
        self._errors[kind].increment(1)

    def engine_died(self) -> None:
        self._healthy.set(0)
        self._deaths.increment(1)

    def close(self) -> None:
        # Dropped while the stub's shared memory is still there (TritonStatLogger.finalize).
        self._errors.clear()
        self._healthy = self._deaths = None
        self._families.clear()


def series_labels(model_name: str, version: str) -> dict[str, str]:
    """Triton's labels and vLLM's: `model_name` is the name clients ask for."""
    return {"model": model_name, "version": str(version), "model_name": model_name}


def make_factory(labels: dict[str, str], loggers: list, per_token: bool = False):
    """A vLLM StatLoggerFactory that keeps the loggers it makes in `loggers`."""
    def factory(vllm_config, engine_index=0):
        logger = TritonStatLogger(labels, vllm_config, engine_index, per_token=per_token)
        loggers.append(logger)
        return logger
    return factory

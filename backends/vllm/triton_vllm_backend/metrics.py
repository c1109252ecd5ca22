"""vLLM's engine statistics as Triton custom metrics (`vllm:` prefix, labels model/version).

A vLLM stat logger receives the engine's statistics once per engine step.  Every Triton
metric update is a round trip from the Python stub to the server (tens of microseconds of
CPU on both sides), so what is updated, and how often, is the cost:

- `record()` only queues the numbers; one worker thread of our own applies them, off the
  engine's loop, at most every FLUSH_INTERVAL seconds, everything queued meanwhile merged
  into one update: per-step series cost a bounded number of calls a second however fast
  the engine steps.  Gauges are set only when their value changed.
- Histograms take one value per call, so a per-token histogram costs a round trip per
  generated token: measured, a third of the serving CPU per streamed token.  The default
  set is per request and per step (`vllm:request_time_per_output_token_seconds` is each
  request's mean, as vLLM's own server reports it); the per-token inter-token latency
  histogram, `vllm:time_per_output_token_seconds`, is opt-in (`per_token`).
"""

from __future__ import annotations

import queue
import threading
import time

import triton_python_backend_utils as pb_utils
from vllm.v1.metrics.loggers import StatLoggerBase

# Bucket bounds as vLLM's own Prometheus logger uses them (seconds, tokens).
_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
_TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
_E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
_N_BUCKETS = [1, 2, 5, 10, 20]


def _token_buckets(max_model_len: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to max_model_len (vLLM's 1-2-5 series)."""
    buckets, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_model_len:
                return buckets
            buckets.append(float(value))
        exponent += 1


GAUGES = {"running", "waiting", "kv_cache_usage"}
PER_TOKEN = {"tpot"}
# Seconds between metric flushes: far below any scrape interval, and few enough calls.
FLUSH_INTERVAL = 0.1


class TritonMetrics:
    """The metric families and this model's labelled series in them."""

    def __init__(self, labels: dict[str, str], max_model_len: int, per_token: bool = False):
        def counter(name, doc):
            family = pb_utils.MetricFamily(name=name, description=doc,
                                           kind=pb_utils.MetricFamily.COUNTER)
            return family, family.Metric(labels=labels)

        def gauge(name, doc):
            family = pb_utils.MetricFamily(name=name, description=doc,
                                           kind=pb_utils.MetricFamily.GAUGE)
            return family, family.Metric(labels=labels)

        def histogram(name, doc, buckets):
            family = pb_utils.MetricFamily(name=name, description=doc,
                                           kind=pb_utils.MetricFamily.HISTOGRAM)
            return family, family.Metric(labels=labels, buckets=buckets)

        # Families are kept referenced: a family that is garbage-collected disappears.
        self._families = []
        token_buckets = _token_buckets(max_model_len)
        specs = {
            "running": ("gauge", "vllm:num_requests_running",
                        "Number of requests in model execution batches.", None),
            "waiting": ("gauge", "vllm:num_requests_waiting",
                        "Number of requests waiting to be processed.", None),
            "kv_cache_usage": ("gauge", "vllm:kv_cache_usage_perc",
                               "KV-cache usage. 1 means 100 percent usage.", None),
            "prompt_tokens": ("counter", "vllm:prompt_tokens_total",
                              "Number of prefill tokens processed.", None),
            "generation_tokens": ("counter", "vllm:generation_tokens_total",
                                  "Number of generation tokens processed.", None),
            "ttft": ("histogram", "vllm:time_to_first_token_seconds",
                     "Histogram of time to first token in seconds.", _TTFT_BUCKETS),
            "tpot": ("histogram", "vllm:time_per_output_token_seconds",
                     "Histogram of time per output token in seconds.", _TPOT_BUCKETS),
            "request_tpot": ("histogram", "vllm:request_time_per_output_token_seconds",
                             "Histogram of time_per_output_token_seconds per request.",
                             _TPOT_BUCKETS),
            "e2e": ("histogram", "vllm:e2e_request_latency_seconds",
                    "Histogram of end to end request latency in seconds.", _E2E_BUCKETS),
            "prompt_per_request": ("histogram", "vllm:request_prompt_tokens",
                                   "Number of prefill tokens processed.", token_buckets),
            "generation_per_request": ("histogram", "vllm:request_generation_tokens",
                                       "Number of generation tokens processed.", token_buckets),
            "n": ("histogram", "vllm:request_params_n",
                  "Histogram of the n request parameter.", _N_BUCKETS),
        }
        if not per_token:
            specs = {k: v for k, v in specs.items() if k not in PER_TOKEN}
        self.series = {}
        self._gauge_values: dict[str, float] = {}
        for key, (kind, name, doc, buckets) in specs.items():
            if kind == "counter":
                family, metric = counter(name, doc)
            elif kind == "gauge":
                family, metric = gauge(name, doc)
            else:
                family, metric = histogram(name, doc, buckets)
            self._families.append(family)
            self.series[key] = metric

    def apply(self, update: dict) -> None:
        """Update the series; `update` maps series keys to a value (counters, gauges) or a
        list of observations (histograms)."""
        for key, value in update.items():
            metric = self.series[key]
            if key in GAUGES:
                if self._gauge_values.get(key) != value:
                    metric.set(value)
                    self._gauge_values[key] = value
            elif isinstance(value, list):
                for v in value:
                    metric.observe(v)
            elif value:
                metric.increment(value)


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
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


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

    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx=0):
        update = {}
        if scheduler_stats is not None:
            update.update(running=scheduler_stats.num_running_reqs,
                          waiting=scheduler_stats.num_waiting_reqs,
                          kv_cache_usage=scheduler_stats.kv_cache_usage)
        if iteration_stats is not None:
            update.update(self._iteration(iteration_stats, self._per_token))
        if update:
            self._queue.put(update)

    @staticmethod
    def _iteration(iteration_stats, per_token: bool) -> dict:
        finished = iteration_stats.finished_requests
        update = {
            "prompt_tokens": iteration_stats.num_prompt_tokens,
            "generation_tokens": iteration_stats.num_generation_tokens,
            "ttft": list(iteration_stats.time_to_first_tokens_iter),
            "n": list(iteration_stats.n_params_iter),
            "e2e": [r.e2e_latency for r in finished],
            # vLLM's own server observes it for every request (0 for a single token).
            "request_tpot": [r.mean_time_per_output_token for r in finished],
            "prompt_per_request": [r.num_prompt_tokens for r in finished],
            "generation_per_request": [r.num_generation_tokens for r in finished],
        }
        if per_token:
            update["tpot"] = list(iteration_stats.inter_token_latencies_iter)
        return update

    def log_engine_initialized(self):
        pass

    def _work(self):
        while True:
            updates = [self._queue.get()]
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
            self._metrics.series.clear()
            self._metrics._families.clear()
            self._metrics = None


def make_factory(labels: dict[str, str], loggers: list, per_token: bool = False):
    """A vLLM StatLoggerFactory that keeps the loggers it makes in `loggers`."""
    def factory(vllm_config, engine_index=0):
        logger = TritonStatLogger(labels, vllm_config, engine_index, per_token=per_token)
        loggers.append(logger)
        return logger
    return factory

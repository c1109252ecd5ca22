"""Every PromQL expression the chart and its README carry, through a real Prometheus.

Runs against a container of $TVB_IMAGE (scripts/run_tests.sh's image pass): Debian's
`prometheus` scrapes the container's Triton metrics port (labelled as the chart's
ServiceMonitor labels it: namespace, service, pod) and the OpenAI frontend's /metrics,
every second, while streamed chat completions (and a few requests Triton refuses) run.
Then each expression of qa/common/promql.py (dashboard panels, alert rules and their
signals, KEDA triggers, the HPA's adapter queries) goes through Prometheus's HTTP API and
must return series with plausible values: rates > 0 where the load makes them, ratios in
[0, 1], quantiles within the latencies the client measured.  The figures are printed.

Beside it, vLLM's own server from the same image, under a load of its own, scraped by the
same Prometheus: the queries of vLLM's own Grafana dashboard, and one that selects a
bucket by its bound as vLLM's server writes it, must return data from both.  Triton's
job is relabelled as the chart's ServiceMonitor relabels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
import time

import httpx
import pytest

from qa.common import TritonServer, promql
from qa.common.image_servers import (
    MODEL,
    MODEL_REPOSITORY,
    image_model_json,
    start_container,
    wait_ready,
)
from qa.common.sse import aiter_events

from .prometheus import Prometheus

pytestmark = [
    pytest.mark.docker, pytest.mark.e2e, pytest.mark.timeout(1200),
    pytest.mark.skipif(not os.environ.get("TVB_IMAGE"),
                       reason="checks the image: runs in the image pass (TVB_IMAGE)"),
]

LOAD_SECONDS = 40
STREAMS = 6
# vLLM's server's load, run once ours has ended (within the queries' one-minute windows):
# the two under load together on 2 cores slowed ours' streams to seconds per token.
VLLM_STREAMS = 3
VLLM_LOAD_SECONDS = 12
MAX_TOKENS = 48
# Figures that the load makes move: their rate must be above 0.  Not Triton's failure
# counter: Triton counts a decoupled model's error response as a success (measured: the
# refused requests below left nv_inference_request_failure at 0); the backend's own error
# counter sees them (kind invalid_argument, which the error ratio leaves out as the
# client's fault).  The engine's health gauge reads 1.
POSITIVE = {"dashboard: Generation tokens/s", "dashboard: Prompt tokens/s",
            "dashboard: Finished requests/s by reason", "dashboard: Backend errors/s by kind",
            "dashboard: Engine alive"}
# Needs kube-state-metrics, which a cluster has and a container does not: evaluated (the
# expression must be valid), no series expected.
CLUSTER_ONLY = {"alert: TritonPodNotReady", "alert signal: TritonPodNotReady",
                "alert: TritonContainerRestarted", "alert signal: TritonContainerRestarted"}
# Alerts that a healthy server under this load must not meet.
QUIET = {"alert: TritonMetricsDown", "alert: VllmNoTokensWhileRunning"}


async def _chat_load(url: str, seconds: float, latencies: list[tuple[float, float]],
                     streams: int = STREAMS) -> None:
    """`streams` streamed chat completions at a time for `seconds`: (TTFT, whole) each."""
    body = {"model": MODEL, "stream": True, "max_tokens": MAX_TOKENS, "ignore_eos": True,
            "messages": [{"role": "user", "content": "Tell me a long story about the sea."}]}
    deadline = time.monotonic() + seconds

    async def worker(client):
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            first = None
            async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
                assert r.status_code == 200, await r.aread()
                async for event in aiter_events(r):
                    if first is None and not event.done:
                        first = time.perf_counter() - t0
            latencies.append((first, time.perf_counter() - t0))

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(worker(client) for _ in range(streams)))


def _refused_requests(http_url: str, n: int = 3) -> None:
    """Requests the backend answers with an error (a bad sampling parameter): the
    backend's error counter then has something to show."""
    for _ in range(n):
        r = httpx.post(f"{http_url}/v2/models/{MODEL}/generate", timeout=60,
                       json={"text_input": "x", "parameters": {"temperature": -1}})
        assert r.status_code >= 400, r.text


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """(prometheus, client latencies, server, the load's thread, vLLM's server's URL)
    once the load has run LOAD_SECONDS, with the last streams still in flight; vLLM's
    server is scraped too, as job vllm-serve, idle until a test loads it."""
    root = tmp_path_factory.mktemp("prometheus")
    (root / "unused").mkdir()
    image = os.environ["TVB_IMAGE"]
    # vLLM's server on the engine settings of the image's sample model, named as ours,
    # at the CPU weight of ours (every container's), starting while ours starts.
    vllm_serve, vllm_checks = start_container(image, "vllm", image_model_json(image))
    with contextlib.ExitStack() as stack:
        stack.callback(vllm_serve.stop, timeout=0)
        # The image's own sample repository, as the chart serves it by default: its model
        # reports vLLM's metrics.  A start takes about 30 s; a 2-core machine shared with
        # other builds took up to 10 min.
        server = stack.enter_context(TritonServer(
            root / "unused", env={"MODEL_REPOSITORY": MODEL_REPOSITORY}, timeout=900))
        # Ready as a load balancer sees it: the model's tokenizer and chat template loaded.
        server.wait_openai("/health/ready")
        wait_ready(vllm_serve, vllm_checks, timeout=900)
        vllm_url = vllm_serve.url("openai")
        jobs = {
            "triton": (f"127.0.0.1:{server.metrics_port}", promql.SCRAPE_LABELS, None),
            "openai-frontend": (f"127.0.0.1:{server.openai_port}", {}, "openai_frontend_.*"),
            "vllm-serve": (vllm_url.removeprefix("http://"), {}, None),
        }
        relabel = {"triton": promql.monitor_relabel_configs()}
        with Prometheus(root / "prom", jobs, relabel=relabel) as prom:
            latencies: list[tuple[float, float]] = []
            load = threading.Thread(target=lambda: asyncio.run(
                _chat_load(server.openai_url, LOAD_SECONDS, latencies)))
            load.start()
            # Halfway, when Prometheus has scraped the counters at 0 for a while: a rate
            # needs a sample from before the increase.
            load.join(LOAD_SECONDS / 2)
            _refused_requests(server.http_url)
            # Queried while the streams still run, so that the gauges read them.
            load.join(LOAD_SECONDS / 2 - 8)
            assert load.is_alive(), "the load ended early"
            yield prom, latencies, server, load, vllm_url
            load.join(180)


def _bound(prom: Prometheus, histogram: str, seconds: float) -> float:
    """The upper bound of `histogram`'s bucket for an observation of `seconds`: no
    quantile of what the server measured can lie above it (the buckets are read off the
    scraped series)."""
    bounds = sorted({float(r["metric"]["le"]) for r in prom.query(f"{histogram}_bucket")})
    return next((b for b in bounds if b >= seconds), math.inf)


def test_prometheus_scrapes_triton_and_the_frontend(loaded):
    prom, *_ = loaded
    # Not vLLM's server's: under ours' load its scrapes can take longer than their 1 s
    # timeout (its series are checked once it has a load of its own, below).
    up = prom.targets_up()
    assert (up["triton"], up["openai-frontend"]) == ("up", "up"), (up, prom.log_tail())
    # The frontend's own series, by route and status.
    rows = prom.query('sum by (path, status) (rate(openai_frontend_requests_total[1m]))')
    assert any(r["metric"].get("path") == "/v1/chat/completions" and r["value"] > 0
               for r in rows), rows


def test_every_chart_expression_returns_plausible_series(loaded):
    prom, latencies, *_ = loaded
    assert latencies, "the load finished no request"
    longest = max(whole for _, whole in latencies)
    longest_ttft = max(ttft for ttft, _ in latencies)
    bounds = {name: _bound(prom, f"vllm:{name}_seconds", longest_ttft if name.startswith(
        "time_to_first") else longest) for name in (
        "time_to_first_token", "inter_token_latency", "e2e_request_latency",
        "request_queue_time")}
    report, problems = [], []
    for q in promql.chart_queries():
        rows = prom.query(q.expr)
        values = [r["value"] for r in rows]
        shown = ", ".join(f"{v:.4g}" for v in values) or "(none)"
        report.append(f"{q.source:55s} {shown}")
        if q.source in CLUSTER_ONLY or q.kind == "alert":
            if q.source in QUIET and rows:
                problems.append(f"{q.source}: fires on a healthy server: {rows}")
            continue
        if not rows:
            problems.append(f"{q.source}: no series: {q.expr}")
            continue
        if any(math.isnan(v) or v < 0 for v in values):
            problems.append(f"{q.source}: {values}")
        if q.kind == "ratio" or "kv_cache_usage_perc{" in q.expr:
            if not all(0 <= v <= 1 for v in values):
                problems.append(f"{q.source}: outside [0, 1]: {values}")
        if q.kind == "quantile":
            bound = next(b for name, b in bounds.items() if f"vllm:{name}_seconds" in q.expr)
            if not all(v <= bound for v in values):
                problems.append(f"{q.source}: {values} above {bound} s, the bucket of the "
                                f"longest the client measured")
        if q.source in POSITIVE and not any(v > 0 for v in values):
            problems.append(f"{q.source}: no rate above 0 under load: {values}")
    print(f"\n{len(latencies)} streams, longest {longest:.2f} s, TTFT up to "
          f"{longest_ttft:.3f} s; each expression under load:\n" + "\n".join(report))
    assert not problems, "\n".join(problems)


# The queries of vLLM's own Grafana dashboard (examples/observability/prometheus_grafana/
# grafana.json in vLLM's repository), its $model_name set and $__rate_interval a minute,
# with the job that tells the two servers apart; and an SLO-style ratio that selects a
# bucket by its bound, which only matches where `le` is spelled as vLLM's server spells it.
VLLM_DASHBOARD = [
    *(f"histogram_quantile({q}, sum by(le) (rate(vllm:{h}_bucket{{SEL}}[1m])))"
      for h in ("e2e_request_latency_seconds", "inter_token_latency_seconds",
                "time_to_first_token_seconds") for q in (0.99, 0.5)),
    *(f"rate(vllm:{h}_sum{{SEL}}[1m]) / rate(vllm:{h}_count{{SEL}}[1m])"
      for h in ("e2e_request_latency_seconds", "inter_token_latency_seconds",
                "time_to_first_token_seconds")),
    "rate(vllm:prompt_tokens_total{SEL}[1m])",
    "rate(vllm:generation_tokens_total{SEL}[1m])",
    "vllm:num_requests_running{SEL}",
    "vllm:num_requests_waiting{SEL}",
    "vllm:kv_cache_usage_perc{SEL}",
    "sum by(le) (increase(vllm:request_prompt_tokens_bucket{SEL}[1m]))",
    "sum by(le) (increase(vllm:request_generation_tokens_bucket{SEL}[1m]))",
    "sum by(finished_reason) (increase(vllm:request_success_total{SEL}[1m]))",
    "rate(vllm:request_queue_time_seconds_sum{SEL}[1m])",
    "rate(vllm:request_prefill_time_seconds_sum{SEL}[1m])",
    "rate(vllm:request_decode_time_seconds_sum{SEL}[1m])",
    "rate(vllm:request_max_num_generation_tokens_sum{SEL}[1m])",
    'sum(rate(vllm:e2e_request_latency_seconds_bucket{SEL,le="5.0"}[1m])) '
    "/ sum(rate(vllm:e2e_request_latency_seconds_count{SEL}[1m]))",
]


def test_queries_written_for_vllm_serve_read_ours_as_they_read_vllms(loaded):
    prom, _, _, ours_load, vllm_url = loaded
    ours_load.join(180)
    served: list[tuple[float, float]] = []
    asyncio.run(_chat_load(vllm_url, VLLM_LOAD_SECONDS, served, VLLM_STREAMS))
    assert served, "vLLM's server finished no request"
    report, problems = [], []
    for template in VLLM_DASHBOARD:
        for job in ("vllm-serve", "triton"):
            expr = template.replace("{SEL}", f'{{model_name="{MODEL}",job="{job}"}}') \
                           .replace("{SEL,", f'{{model_name="{MODEL}",job="{job}",')
            values = [r["value"] for r in prom.query(expr)]
            report.append(f"{job:11s} {', '.join(f'{v:.4g}' for v in values) or '(none)':30s}"
                          f" {expr}")
            if not values or any(math.isnan(v) for v in values):
                problems.append(f"{job}: {values}: {expr}")
    print("\nvLLM's dashboard queries, vLLM's server then ours:\n" + "\n".join(report))
    assert not problems, "\n".join(problems)

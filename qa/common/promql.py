"""Every PromQL expression the chart and its README carry, as a user would run it.

- the Grafana dashboard's panel queries (helm/dashboards/triton-vllm.json), with its
  variables as "All" gives them (`$model_name` -> `.*`) and `$__rate_interval` a window;
- the PrometheusRule's alert expressions, and each one's signal: the expression with its
  final threshold comparison taken off, the value an operator graphs;
- the KEDA ScaledObject's trigger queries;
- the HPA's Pods metrics, as prometheus-adapter's rule in helm/README.md serves them.

The chart is rendered with helm/ci/observability-values.yaml plus KEDA or the HPA, for
release `llm` in namespace `serving` (qa.common.chart's defaults): series scraped with
the labels a ServiceMonitor gives them (namespace, service, pod) match its selectors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from qa.common import chart

DASHBOARD = chart.CHART / "dashboards" / "triton-vllm.json"
OBSERVABILITY_VALUES = chart.CHART / "ci" / "observability-values.yaml"
RATE_WINDOW = "1m"
# What a scrape of the release's Triton pods is labelled with, by the ServiceMonitor.
SCRAPE_LABELS = {"namespace": chart.NAMESPACE, "service": f"{chart.RELEASE}-triton-vllm-triton",
                 "pod": f"{chart.RELEASE}-triton-vllm-0"}


@dataclass(frozen=True)
class Query:
    source: str      # where it is: "dashboard: <panel>", "alert: <name>", "keda: <trigger>", ...
    expr: str        # as Prometheus evaluates it
    kind: str        # "rate", "ratio", "quantile", "gauge", "alert", "count": what plausible means


def dashboard_exprs(dashboard: dict | None = None) -> list[tuple[str, str]]:
    """(panel title, expr) for every target of every panel, as written in the JSON."""
    dashboard = dashboard or json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"]
            for target in panel.get("targets", [])]


def with_dashboard_variables(expr: str) -> str:
    return expr.replace("$model_name", ".*").replace("$__rate_interval", RATE_WINDOW)


def _kind(expr: str) -> str:
    if expr.startswith("histogram_quantile"):
        return "quantile"
    if " / " in expr:
        return "ratio"
    if "rate(" in expr:
        return "rate"
    return "gauge"


# A trailing comparison with a number: `... > 0.9`, `... == 0`.
_THRESHOLD = re.compile(r"\s*(>|<|==|!=|>=|<=)\s*[0-9.e+-]+\s*$")


def signal(expr: str) -> str:
    """An alert's expression without its final threshold: the first operand of `and`."""
    first = re.split(r"\s+and\s+on\s*\([^)]*\)\s+", expr)[0]
    return _THRESHOLD.sub("", first.strip())


def rendered() -> list[dict]:
    """The observability fixture with KEDA, then with the HPA (the chart takes one)."""
    return [m for scaler in ("keda", "autoscaling")
            for m in chart.render([OBSERVABILITY_VALUES], {scaler: {"enabled": True}})
            if scaler == "keda" or m["kind"] == "HorizontalPodAutoscaler"]


def adapter_rule_query(readme: str, metric: str) -> str:
    """The HPA's metric `vllm_X` as the README's prometheus-adapter rule computes it for
    the release's pods (its metricsQuery with the series and label matchers filled in)."""
    match = re.search(r"metricsQuery: '(.+)'", readme)
    if match is None:
        raise AssertionError("no prometheus-adapter metricsQuery in helm/README.md")
    series = "vllm:" + metric.removeprefix("vllm_")
    matchers = f'namespace="{SCRAPE_LABELS["namespace"]}",pod=~"{SCRAPE_LABELS["pod"]}"'
    return (match.group(1).replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", matchers).replace("<<.GroupBy>>", "pod"))


def chart_queries() -> list[Query]:
    manifests = rendered()
    queries = [Query(f"dashboard: {title}", with_dashboard_variables(expr), _kind(expr))
               for title, expr in dashboard_exprs()]
    for rule_set in (m for m in manifests if m["kind"] == "PrometheusRule"):
        for group in rule_set["spec"]["groups"]:
            for rule in group["rules"]:
                expr = " ".join(rule["expr"].split())
                queries.append(Query(f"alert: {rule['alert']}", expr, "alert"))
                queries.append(Query(f"alert signal: {rule['alert']}", signal(expr),
                                     _kind(signal(expr))))
    for scaled in (m for m in manifests if m["kind"] == "ScaledObject"):
        for trigger in scaled["spec"]["triggers"]:
            queries.append(Query(f"keda: {trigger['name']}", trigger["metadata"]["query"],
                                 "gauge"))
    readme = (chart.CHART / "README.md").read_text()
    series_query = re.search(r"seriesQuery: '(.+)'", readme)
    if series_query is None:
        raise AssertionError("no prometheus-adapter seriesQuery in helm/README.md")
    queries.append(Query("hpa: the adapter's seriesQuery", series_query.group(1), "gauge"))
    for hpa in (m for m in manifests if m["kind"] == "HorizontalPodAutoscaler"):
        for metric in hpa["spec"]["metrics"]:
            name = metric["pods"]["metric"]["name"]
            queries.append(Query(f"hpa: {name}", adapter_rule_query(readme, name), "gauge"))
    return queries


# Prometheus Operator's RelabelConfig fields, as Prometheus's own configuration names them.
_RELABEL_FIELDS = {"sourceLabels": "source_labels", "targetLabel": "target_label",
                   "regex": "regex", "replacement": "replacement", "action": "action",
                   "separator": "separator", "modulus": "modulus"}


def monitor_relabel_configs() -> list[dict]:
    """The chart's ServiceMonitor's metricRelabelings, as a scrape config's
    metric_relabel_configs: what Prometheus Operator writes into Prometheus's own."""
    [monitor] = [m for m in chart.render([OBSERVABILITY_VALUES]) if m["kind"] == "ServiceMonitor"]
    [endpoint] = monitor["spec"]["endpoints"]
    return [{_RELABEL_FIELDS[k]: v for k, v in rule.items()}
            for rule in endpoint.get("metricRelabelings", [])]

"""The chart's Grafana dashboard and alert rules: the dashboard's JSON, its ConfigMap for
kube-prometheus-stack's sidecar, every panel's query in the set qa/L0_prometheus evaluates
against a real Prometheus, and the rules through Prometheus's own promtool (`check rules`,
and `test rules` with tests/helm/alerts/alerts_test.yaml: each alert fires when it should
and stays quiet when it should not)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from qa.common import chart, promql

ALERT_TESTS = Path(__file__).parent / "alerts" / "alerts_test.yaml"
ALERTS = {"VllmKvCacheNearFull", "VllmTimeToFirstTokenHigh", "TritonRequestErrorRatioHigh",
          "VllmNoTokensWhileRunning", "TritonMetricsDown", "TritonPodNotReady",
          "TritonContainerRestarted"}


def observability() -> list[dict]:
    return chart.render([promql.OBSERVABILITY_VALUES])


def prometheus_rule(manifests: list[dict]) -> dict:
    [rule] = [m for m in manifests if m["kind"] == "PrometheusRule"]
    return rule


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: scripts/setup_host.sh installs Debian's prometheus")
    return path


def test_dashboard_and_rules_are_off_by_default():
    kinds = {(m["kind"], m["metadata"]["name"]) for m in chart.render()}
    assert not any(kind == "PrometheusRule" or name.endswith("-dashboard")
                   for kind, name in kinds)


def test_dashboard_configmap_is_labelled_for_the_grafana_sidecar():
    [configmap] = [m for m in observability() if m["kind"] == "ConfigMap"
                   and m["metadata"]["name"].endswith("-dashboard")]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "LLM"}
    assert json.loads(configmap["data"]["triton-vllm.json"]) == json.loads(
        promql.DASHBOARD.read_text())


def test_dashboard_json_is_a_grafana_dashboard_of_prometheus_panels():
    dashboard = json.loads(promql.DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["model_name"]["allValue"] == ".*"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            assert 'model_name=~"$model_name"' in target["expr"] or \
                'model=~"$model_name"' in target["expr"], target["expr"]


def test_dashboard_covers_what_operators_watch():
    exprs = " ".join(expr for _, expr in promql.dashboard_exprs())
    for series in ("vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket",
                   "vllm:inter_token_latency_seconds_bucket",
                   "vllm:e2e_request_latency_seconds_bucket",
                   "vllm:request_queue_time_seconds_bucket", "vllm:num_requests_waiting",
                   "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total",
                   "vllm:request_success_total", "nv_inference_request_failure"):
        assert series in exprs, series
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs


def test_every_panel_query_is_in_the_evaluated_set():
    evaluated = {q.expr for q in promql.chart_queries()}
    for title, expr in promql.dashboard_exprs():
        assert promql.with_dashboard_variables(expr) in evaluated, title


def test_every_alert_and_scaling_query_is_in_the_evaluated_set():
    sources = {q.source for q in promql.chart_queries()}
    assert {f"alert: {a}" for a in ALERTS} | {f"alert signal: {a}" for a in ALERTS} <= sources
    assert {"keda: requests-waiting", "keda: kv-cache-usage"} <= sources
    assert {"hpa: vllm_num_requests_waiting", "hpa: vllm_kv_cache_usage_perc"} <= sources


def test_every_evaluated_query_parses(tmp_path):
    """promtool parses each as a recording rule's expression: a typo fails here, not in
    Grafana."""
    rules = {"groups": [{"name": "queries", "rules": [
        {"record": f"q{i}", "expr": q.expr} for i, q in enumerate(promql.chart_queries())]}]}
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool(), "check", "rules", str(tmp_path / "queries.yaml")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_thresholds_are_values():
    rules = {r["alert"]: r for r in prometheus_rule(chart.render(
        [promql.OBSERVABILITY_VALUES], {"metrics": {"prometheusRule": {"alerts": {
            "kvCacheUsage": 0.75, "ttftP99Seconds": 7, "errorRatio": 0.2, "for": "2m",
            "notReadyFor": "30m", "restartWindow": "1h"}}}}))["spec"]["groups"][0]["rules"]}
    assert set(rules) == ALERTS
    assert "> 0.75" in rules["VllmKvCacheNearFull"]["expr"]
    assert rules["VllmTimeToFirstTokenHigh"]["expr"].endswith("> 7")
    assert rules["TritonRequestErrorRatioHigh"]["expr"].endswith("> 0.2")
    assert rules["VllmNoTokensWhileRunning"]["for"] == "2m"
    assert rules["TritonPodNotReady"]["for"] == "30m"
    assert "[1h])) > 0" in rules["TritonContainerRestarted"]["expr"]


@pytest.fixture
def rules_dir(tmp_path) -> Path:
    """The rendered PrometheusRule as a Prometheus rules file, beside the unit tests."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(prometheus_rule(observability())["spec"]))
    shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    return tmp_path


def test_promtool_check_rules(rules_dir):
    result = subprocess.run([promtool(), "check", "rules", str(rules_dir / "rules.yaml")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_promtool_test_rules_each_alert_fires_and_stays_quiet(rules_dir):
    tests = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    for alert in ALERTS:  # each alert has a quiet case and a firing one
        cases = [c for t in tests for c in t["alert_rule_test"] if c["alertname"] == alert]
        assert any(not c["exp_alerts"] for c in cases), alert
        assert any(c["exp_alerts"] for c in cases), alert
    result = subprocess.run([promtool(), "test", "rules", str(rules_dir / ALERT_TESTS.name)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

"""Chart-to-image conformance of a model repository made from values: the chart's
ConfigMap (the models file, at the kubelet's item path) is what the real image's `serve`
makes the repository from, its discovery parameters agree with model.json (the backend
refuses the model otherwise), and the `helm test` Pods pass through the Triton pod's own
frontend.  See release.py for the runner."""

from __future__ import annotations

import json

import pytest

from qa.common import chart
from qa.common.http_calls import fetch_json

from .release import HERE, run_helm_tests, started_release

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    yield from started_release(tmp_path_factory, HERE / "values-models.yaml")


@pytest.mark.parametrize("kind", ["readinessProbe", "livenessProbe"])
def test_probes_pass_with_the_values_model(release, kind):
    probe = release.probe(release.server, kind)
    ok, why = probe.check()
    assert ok, f"{kind}: {why}\n{release.logs()}"
    # Readiness checks the values' model by name.
    if kind == "readinessProbe":
        assert chart.required_models(probe.spec) == ["tiny"]


def test_model_config_is_the_values(release):
    url = f"http://127.0.0.1:{release.server.port_of('http')}/v2/models/tiny/config"
    config = fetch_json(url, timeout=10)
    params = {k: v["string_value"] for k, v in config["parameters"].items()}
    assert params["vllm_model"] == "/opt/models/tiny-llama"
    assert params["vllm_max_model_len"] == "1024"
    assert params["REPORT_CUSTOM_METRICS"] == "true"
    # engineArgs reached model.json as flags (serve logs each model.json it writes).
    made = next(line for line in release.server.logs(tail=100_000).splitlines()
                if line.startswith("serve: ") and line.split(":")[1].endswith("/tiny"))
    assert json.loads(made.split(": ", 2)[2])["enable_prefix_caching"] is True


def test_helm_test_pods_pass(release):
    run_helm_tests(release)

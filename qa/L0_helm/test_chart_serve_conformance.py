"""Chart-to-image conformance of modelRepository.source=serve: the pod's args are the
image's `serve` with model.path and model.args, the repository it makes is the one the
real image serves (named as the chart's readiness probe expects), and its frontend gets
the frontend's flags.  See release.py for the runner."""

from __future__ import annotations

import pytest

from qa.common import chart
from qa.common.http_calls import fetch_json

from .release import HERE, started_release

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    yield from started_release(tmp_path_factory, HERE / "values-serve.yaml")


def test_readiness_probe_passes_for_the_model_serve_named(release):
    probe = release.probe(release.server, "readinessProbe")
    ok, why = probe.check()
    assert ok, f"readinessProbe: {why}\n{release.logs()}"
    assert chart.required_models(probe.spec) == ["tiny"]


def test_the_repository_is_the_generators(release):
    url = f"http://127.0.0.1:{release.server.port_of('http')}/v2/models/tiny/config"
    config = fetch_json(url, timeout=10)
    params = {k: v["string_value"] for k, v in config["parameters"].items()}
    assert params == {"vllm_model": "/opt/models/tiny-llama", "vllm_runner": "generate",
                      "vllm_max_model_len": "2048", "REPORT_CUSTOM_METRICS": "true"}


def test_a_greedy_completion_through_the_pods_frontend(release):
    url = f"http://127.0.0.1:{release.server.port_of('openai')}/v1/completions"
    body = {"model": "tiny", "prompt": "Hello", "max_tokens": 4, "temperature": 0}
    answer = fetch_json(url, body, timeout=60)
    assert answer["usage"]["completion_tokens"] == 4, answer

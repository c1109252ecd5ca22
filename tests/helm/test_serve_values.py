"""modelRepository.source=serve: model.path and model.args become the image's `serve`
command, and the model name the chart's probes and `helm test` use is the one `serve`
gives (triton_vllm_backend.serve, with vLLM's real parser)."""
from __future__ import annotations

import pytest
from triton_vllm_backend import serve

from qa.common import chart


def server_container(values: dict) -> dict:
    manifests = chart.render([], {"modelRepository": {"source": "serve"}, "model": values})
    workload = next(m for m in manifests if m["kind"] == "Deployment"
                    and m["metadata"]["labels"]["app.kubernetes.io/component"] == "server")
    return next(c for c in workload["spec"]["template"]["spec"]["containers"]
                if c["name"] == "triton")


@pytest.fixture(scope="module")
def parser():
    return serve.build_parser()


def test_the_args_are_serves_then_tritonservers():
    container = server_container({"path": "/models/m", "args": ["--max-model-len", "64"]})
    assert container["args"] == ["serve", "/models/m", "--max-model-len", "64", "--",
                                 "--model-control-mode=explicit", "--load-model=*"]
    assert "MODEL_REPOSITORY" not in {e["name"] for e in container["env"]}


@pytest.mark.parametrize("folder, args", [
    ("my-llm", []),
    ("My Model+1", []),
    ("m", ["--served-model-name", "llama"]),
    ("m", ["--served-model-name=llama"]),
    ("m", ["--served-model-name", "org/llama"]),
    ("m", ["--max-model-len", "64", "--served-model-name", "a", "b"]),
])
def test_the_chart_names_the_model_as_serve_does(folder, args, parser, tmp_path):
    path = tmp_path / folder
    path.mkdir()
    (path / "config.json").write_text("{}")
    spec, _ = serve.parse_model([str(path), *args], parser)
    probe = server_container({"path": str(path), "args": args})["readinessProbe"]
    assert chart.required_models(probe) == [spec.name]


def test_serve_needs_a_path():
    with pytest.raises(chart.ChartError, match="path"):
        chart.render([], {"modelRepository": {"source": "serve"}})

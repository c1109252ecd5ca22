"""Components: which ones a plan gets, and how flags become tritonserver's flags."""
import pytest

from tritonbuild.components import compose
from tritonbuild.components.tritonserver import server_args


def names(plan):
    return [c.name for c in compose(plan)]


def test_compose(plan_for):
    assert names(plan_for()) == ["system", "vllm", "tritonserver", "sample-model", "vllm-backend"]
    assert "openai-frontend" in names(plan_for("--endpoint=openai"))
    assert names(plan_for("--backend=python")) == ["system", "vllm", "tritonserver"]


@pytest.mark.parametrize("argv,present,absent", [
    ([], ["--allow-http=true", "--allow-grpc=true", "--allow-metrics=false", "--log-info=false"],
     ["--metrics-port=8002"]),
    (["--endpoint=http"], ["--allow-grpc=false"], ["--grpc-port=8001"]),
    (["--enable-metrics"], ["--allow-metrics=true", "--metrics-port=8002",
                            "--allow-cpu-metrics=false", "--allow-gpu-metrics=false"], []),
    (["--enable-metrics", "--enable-cpu-metrics"], ["--allow-cpu-metrics=true"], []),
    (["--enable-gpu", "--enable-metrics", "--enable-gpu-metrics"], ["--allow-gpu-metrics=true"], []),
    (["--enable-logging"], ["--log-info=true"], []),
    (["--enable-tracing"], ["--trace-config=level=TIMESTAMPS"], []),
    (["--enable-stats"], [], ["--http-restricted-api=statistics:"
                              "triton-statistics-key=${TRITON_STATISTICS_KEY}"]),
    (["--endpoint=sagemaker"], ["--allow-sagemaker=true", "--sagemaker-port=8080"], []),
    (["--endpoint=vertex-ai"], ["--allow-vertex-ai=true", "--vertex-ai-port=8080"], []),
    (["--endpoint=vertex-ai", "--endpoint=sagemaker"], ["--vertex-ai-port=8081"], []),
])
def test_server_args(plan_for, argv, present, absent):
    args = server_args(plan_for(*argv))
    for a in present:
        assert a in args
    for a in absent:
        assert a not in args


def test_ports(plan_for):
    from tritonbuild.render import render
    d = render(plan_for("--endpoint=openai", "--enable-metrics")).dockerfile
    assert "EXPOSE 8000 8001 8002 9000" in d
    assert "EXPOSE 8000\n" in render(plan_for("--endpoint=http")).dockerfile

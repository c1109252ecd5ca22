"""Components: which ones a plan gets, and how flags become tritonserver's flags."""
import pytest

from tritonbuild.pipeline.components import Service, User, compose
from tritonbuild.pipeline.components.hide_keys import LIBRARY, LIBRARY_DIR
from tritonbuild.pipeline.components.tritonserver import api_key_args, server_args
from tritonbuild.pipeline.render import render


def names(plan):
    return [c.name for c in compose(plan)]


def test_compose(plan_for):
    assert names(plan_for()) == ["system", "vllm", "tritonserver", "hide-keys", "sample-model",
                                 "vllm-backend"]
    assert names(plan_for("--endpoint=openai")) == [
        "system", "vllm", "tritonserver", "hide-keys", "openai-frontend", "sample-model",
        "vllm-backend"]
    assert names(plan_for("--backend=python")) == ["system", "vllm", "tritonserver", "hide-keys"]


CONTROL = ("model-repository,shared-memory,trace,logging:"
           "triton-model-control-key=${TRITON_MODEL_CONTROL_KEY}")
API_KEY = "inference:authorization=Bearer ${TRITON_OPENAI_API_KEY}"


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
    (["--enable-stats"], ["--allow-http=true"],
     ["--http-restricted-api=statistics:triton-statistics-key=${TRITON_STATISTICS_KEY}"]),
    # The model-repository API (and shared memory, trace, logging) in every image.
    ([], [f"--http-restricted-api={CONTROL}", f"--grpc-restricted-protocol={CONTROL}"], []),
    (["--enable-stats"], [f"--http-restricted-api={CONTROL}"], []),
    (["--endpoint=grpc"], [f"--grpc-restricted-protocol={CONTROL}"],
     [f"--http-restricted-api={CONTROL}"]),
    # The API key's restriction is the entrypoint's to add, only when the key is set.
    (["--endpoint=openai"], [], [f"--http-restricted-api={API_KEY}",
                                 f"--grpc-restricted-protocol={API_KEY}"]),
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


@pytest.mark.parametrize("argv, args", [
    ([], [f"--http-restricted-api={API_KEY}", f"--grpc-restricted-protocol={API_KEY}"]),
    (["--endpoint=http"], [f"--http-restricted-api={API_KEY}"]),
    (["--endpoint=grpc", "--endpoint=openai"], [f"--grpc-restricted-protocol={API_KEY}"]),
])
def test_api_key_args_restrict_inference_on_the_endpoints_served(plan_for, argv, args):
    assert api_key_args(plan_for(*argv)) == args


def test_ports(plan_for):
    d = render(plan_for("--endpoint=openai", "--enable-metrics")).dockerfile
    assert "EXPOSE 8000 8001 8002 9000" in d
    assert "EXPOSE 8000\n" in render(plan_for("--endpoint=http")).dockerfile


def hook(plan, name):
    return [x for c in compose(plan) for x in getattr(c, name)()]


def test_exactly_one_component_names_the_user(plan_for):
    assert [c.user() for c in compose(plan_for()) if c.user()] == [User("triton", 1000)]
    assert [c.user() for c in compose(plan_for("--enable-gpu")) if c.user()] == [
        User("triton-server", 1000)]


def test_server_args_start_with_the_default_repository(plan_for):
    plan = plan_for()
    assert hook(plan, "server_args") == [
        "--model-repository=${MODEL_REPOSITORY:-/opt/tritonserver/model_repository}",
        *server_args(plan)]


def frontends(plan):
    return [s for s in hook(plan, "services") if s.title == "the OpenAI frontend"]


def test_the_frontend_is_a_service_over_http_or_else_grpc(plan_for):
    assert frontends(plan_for()) == []
    [http] = frontends(plan_for("--endpoint=openai"))
    assert http.argv == ("triton-openai", "--triton-url", "http://localhost:8000",
                         "--host", "0.0.0.0", "--port", "9000")
    assert frontends(plan_for("--endpoint=grpc", "--endpoint=openai")) == [Service(
        "the OpenAI frontend", ("triton-openai", "--triton-url", "localhost:8001",
                                "--host", "0.0.0.0", "--port", "9000"),
        takes_frontend_args=True)]


def test_the_model_watch_runs_beside_every_server_with_an_http_endpoint(plan_for):
    [watch] = [s for s in hook(plan_for(), "services") if s.title == "the model watch"]
    assert watch.gives_up_on_the_server
    assert watch.argv[-4:] == ("-m", "triton_vllm_backend.watch",
                               "--url", "http://127.0.0.1:8000")
    # Its exit kills tritonserver before the rest stop (entrypoint.sh.j2).
    entrypoint, _ = render(plan_for()).files["image/entrypoint.sh"]
    assert "watches+=($!)" in entrypoint
    assert 'kill -KILL "$triton_pid"' in entrypoint
    assert [s.title for s in hook(plan_for("--endpoint=grpc"), "services")] == []



@pytest.mark.parametrize("argv", [[], ["--enable-gpu"], ["--backend=python", "--endpoint=http"]])
def test_every_image_builds_the_key_hiding_library_and_preloads_it_in_tritonserver(plan_for,
                                                                                   argv):
    rendered = render(plan_for(*argv))
    assert "FROM builder AS hide-keys" in rendered.dockerfile
    assert f"COPY --from=hide-keys {LIBRARY_DIR}/ {LIBRARY_DIR}/" in rendered.dockerfile
    assert "libc6-dev" in rendered.dockerfile   # the headers gcc alone does not bring
    launch = [line.strip() for line in rendered.files["image/entrypoint.sh"][0].splitlines()
              if "LD_PRELOAD=" in line]
    assert launch == [f'export LD_PRELOAD="{LIBRARY}${{LD_PRELOAD:+ $LD_PRELOAD}}"']

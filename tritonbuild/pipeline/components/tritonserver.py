"""Triton Inference Server itself: its files, its ports and the entrypoint that starts it."""
from __future__ import annotations

from ...ports import PORTS, vertex_ai_port
from .base import Component, ContextItem, Stage

__all__ = ["TritonServer", "REPOSITORY_DIR", "server_args", "api_key_args"]

# The model repository the image serves unless $MODEL_REPOSITORY names another.
REPOSITORY_DIR = "/opt/tritonserver/model_repository"

_STATISTICS_KEY = "statistics:triton-statistics-key=${TRITON_STATISTICS_KEY}"
# Loading a model runs its code (a Python model's, or one a `file:` override brings), and
# shared memory, trace and logging change what the server reads and writes: these answer
# only requests that carry the key the entrypoint makes at start ($TRITON_MODEL_CONTROL_KEY,
# random unless set).  Over gRPC the header is `triton-grpc-protocol-triton-model-control-key`.
_MODEL_CONTROL_KEY = ("model-repository,shared-memory,trace,logging:"
                      "triton-model-control-key=${TRITON_MODEL_CONTROL_KEY}")
# KServe inference (infer, generate, generate_stream; gRPC ModelInfer, ModelStreamInfer)
# behind the OpenAI frontend's key; the entrypoint adds it when $TRITON_OPENAI_API_KEY is set.
_API_KEY = "inference:authorization=Bearer ${TRITON_OPENAI_API_KEY}"


class TritonServer(Component):
    name = "tritonserver"

    def stages(self) -> list[Stage]:
        # The GPU image's base already is tritonserver; the CPU image takes the server and
        # the Python backend out of the nvidia-pytriton wheel.
        return [] if self.plan.gpu else [Stage("tritonserver", "cpu/tritonserver.j2")]

    def env(self) -> list[tuple[str, str]]:
        if self.plan.gpu:
            return []
        return [("LD_LIBRARY_PATH", "/opt/tritonserver/lib")]

    def ports(self) -> list[int]:
        endpoints = self.plan.endpoints.value
        ports = [PORTS[e] for e in ("http", "grpc") if e in endpoints]
        if self.plan.metrics.value:
            ports.append(PORTS["metrics"])
        if "sagemaker" in endpoints:
            ports.append(PORTS["sagemaker"])
        if "vertex-ai" in endpoints:
            ports.append(vertex_ai_port(endpoints))
        return ports

    def server_args(self) -> list[str]:
        repository = f"--model-repository=${{MODEL_REPOSITORY:-{REPOSITORY_DIR}}}"
        return [repository, *server_args(self.plan)]

    def api_key_args(self) -> list[str]:
        return api_key_args(self.plan)

    def project_steps(self) -> list[str]:
        return ["common/project-entrypoint.j2"]

    def context(self) -> list[ContextItem]:
        return [
            ContextItem("image/entrypoint.sh", template="image/entrypoint.sh.j2", executable=True),
            ContextItem("image/versions.json", template="image/versions.json.j2"),
            ContextItem("image/report_versions.py", template="image/report_versions.py.j2",
                        executable=True),
        ]


def _on(flag: bool) -> str:
    return "true" if flag else "false"


def _endpoint_args(endpoints: tuple[str, ...]) -> list[str]:
    args = [f"--allow-http={_on('http' in endpoints)}"]
    if "http" in endpoints:
        args.append(f"--http-port={PORTS['http']}")
    args.append(f"--allow-grpc={_on('grpc' in endpoints)}")
    if "grpc" in endpoints:
        args.append(f"--grpc-port={PORTS['grpc']}")
    if "sagemaker" in endpoints:
        args += ["--allow-sagemaker=true", f"--sagemaker-port={PORTS['sagemaker']}"]
    if "vertex-ai" in endpoints:
        args += ["--allow-vertex-ai=true", f"--vertex-ai-port={vertex_ai_port(endpoints)}"]
    return args


def _restricted(endpoints: tuple[str, ...], restriction: str) -> list[str]:
    """The flags that restrict APIs of the KServe endpoints the image serves."""
    args = []
    if "http" in endpoints:
        args.append(f"--http-restricted-api={restriction}")
    if "grpc" in endpoints:
        args.append(f"--grpc-restricted-protocol={restriction}")
    return args


def api_key_args(plan) -> list[str]:
    """tritonserver's flags that admit KServe inference requests only with the OpenAI
    frontend's key (`authorization: Bearer $TRITON_OPENAI_API_KEY`): not in server_args,
    since the entrypoint adds them only when that variable is set."""
    return _restricted(plan.endpoints.value, _API_KEY)


def server_args(plan) -> list[str]:
    """tritonserver's flags for the endpoints and features of the plan.

    The model repository is not here: the component adds it, from $MODEL_REPOSITORY.
    """
    endpoints = plan.endpoints.value
    args = ["--backend-directory=/opt/tritonserver/backends", *_endpoint_args(endpoints)]
    args.append(f"--allow-metrics={_on(plan.metrics.value)}")
    if plan.metrics.value:
        args += [f"--metrics-port={PORTS['metrics']}",
                 f"--allow-gpu-metrics={_on(plan.gpu_metrics.value)}",
                 f"--allow-cpu-metrics={_on(plan.cpu_metrics.value)}"]
    if not plan.stats.value:
        # Without --enable-stats the statistics API answers only requests that carry the
        # key the entrypoint makes at start ($TRITON_STATISTICS_KEY, random unless set).
        args += _restricted(endpoints, _STATISTICS_KEY)
    args += _restricted(endpoints, _MODEL_CONTROL_KEY)
    # Without --enable-logging the server logs warnings and errors only.
    args.append(f"--log-info={_on(plan.logging.value)}")
    if plan.tracing.value:
        args += ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=1000",
                 "--trace-config=triton,file=/tmp/triton-trace.json"]
    return args

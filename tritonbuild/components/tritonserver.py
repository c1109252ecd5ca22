"""Triton Inference Server itself: its files, its ports and the entrypoint that starts it."""
from __future__ import annotations

from .base import Component, ContextItem, Stage

__all__ = ["TritonServer", "PORTS"]

PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002, "sagemaker": 8080, "vertex-ai": 8080,
         "openai": 9000}


def vertex_ai_port(endpoints: tuple[str, ...]) -> int:
    # SageMaker insists on 8080; Vertex AI reads its port from AIP_HTTP_PORT at run time.
    return 8081 if "sagemaker" in endpoints else PORTS["vertex-ai"]


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

    def project_steps(self) -> list[str]:
        return ["common/project-entrypoint.j2"]

    def context(self) -> list[ContextItem]:
        return [
            ContextItem("image/entrypoint.sh", template="image/entrypoint.sh.j2", executable=True),
            ContextItem("image/versions.json", template="image/versions.json.j2"),
            ContextItem("image/report_versions.py", template="image/report_versions.py.j2",
                        executable=True),
        ]


def server_args(plan) -> list[str]:
    """tritonserver's flags for the endpoints and features of the plan.

    The model repository is not here: the entrypoint adds it from $MODEL_REPOSITORY.
    """
    endpoints = plan.endpoints.value
    on = lambda flag: "true" if flag else "false"  # noqa: E731
    args = ["--backend-directory=/opt/tritonserver/backends"]
    args.append(f"--allow-http={on('http' in endpoints)}")
    if "http" in endpoints:
        args.append(f"--http-port={PORTS['http']}")
    args.append(f"--allow-grpc={on('grpc' in endpoints)}")
    if "grpc" in endpoints:
        args.append(f"--grpc-port={PORTS['grpc']}")
    if "sagemaker" in endpoints:
        args += ["--allow-sagemaker=true", f"--sagemaker-port={PORTS['sagemaker']}"]
    if "vertex-ai" in endpoints:
        args += ["--allow-vertex-ai=true", f"--vertex-ai-port={vertex_ai_port(endpoints)}"]
    args.append(f"--allow-metrics={on(plan.metrics.value)}")
    if plan.metrics.value:
        args += [f"--metrics-port={PORTS['metrics']}",
                 f"--allow-gpu-metrics={on(plan.gpu_metrics.value)}",
                 f"--allow-cpu-metrics={on(plan.cpu_metrics.value)}"]
    if not plan.stats.value:
        # Without --enable-stats the statistics API answers only requests that carry the
        # key the entrypoint makes at start ($TRITON_STATISTICS_KEY, random unless set).
        if "http" in endpoints:
            args.append("--http-restricted-api=statistics:"
                        "triton-statistics-key=${TRITON_STATISTICS_KEY}")
        if "grpc" in endpoints:
            args.append("--grpc-restricted-protocol=statistics:"
                        "triton-statistics-key=${TRITON_STATISTICS_KEY}")
    # Without --enable-logging the server logs warnings and errors only.
    args.append(f"--log-info={on(plan.logging.value)}")
    if plan.tracing.value:
        args += ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=1000",
                 "--trace-config=triton,file=/tmp/triton-trace.json"]
    return args

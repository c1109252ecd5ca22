"""The operating system layer: the base images, Python, the non-root user, the entrypoint."""
from __future__ import annotations

from .base import Component, ContextItem, Stage, User

__all__ = ["CpuSystem", "GpuSystem", "USER", "GPU_USER", "ENTRYPOINT", "NGC_ENTRYPOINT",
           "AIP_MODE_HOOK", "NGC_TRITONSERVER"]

# The non-root user the server runs as.  NGC's tritonserver images already have
# `triton-server` with uid 1000, so the GPU image uses that one.
USER = User("triton", 1000)
GPU_USER = User("triton-server", 1000)

ENTRYPOINT = "/opt/triton-vllm/entrypoint.sh"
# NGC's own entrypoint: it prints the banner, sets up CUDA forward compatibility on older
# data-center drivers and sources /opt/nvidia/entrypoint.d/*.sh, then runs its arguments.
NGC_ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"
# Sourced after NGC's 99-check-run-aip-mode.sh (names sort), which puts tritonserver's
# full path in front of the command when AIP_MODE is set (Vertex AI).
AIP_MODE_HOOK = "99-zz-triton-vllm-aip-mode.sh"
NGC_TRITONSERVER = "/opt/tritonserver/bin/tritonserver"


class CpuSystem(Component):
    name = "system"

    def user(self) -> User:
        return USER

    def entrypoint(self) -> list[str]:
        return [ENTRYPOINT]

    def runtime_packages(self) -> list[str]:
        py = self.plan.python_version.value
        # libpython: the Python backend stub embeds it; libnuma1: vLLM's CPU engine.
        return [f"python{py}", f"libpython{py}", "libnuma1", "ca-certificates"]

    def build_packages(self) -> list[str]:
        return [f"python{self.plan.python_version.value}-venv"]

    def stages(self) -> list[Stage]:
        return [Stage("runtime-base", "cpu/runtime-base.j2"),
                Stage("builder", "common/builder.j2")]


class GpuSystem(CpuSystem):
    def user(self) -> User:
        return GPU_USER

    def entrypoint(self) -> list[str]:
        return [NGC_ENTRYPOINT, ENTRYPOINT]

    def runtime_packages(self) -> list[str]:
        return []  # NGC's image has Python, the CA bundle and the CUDA libraries

    def build_packages(self) -> list[str]:
        return ["python3-venv"]

    def stages(self) -> list[Stage]:
        return [Stage("runtime-base", "gpu/runtime-base.j2"),
                Stage("builder", "common/builder.j2")]

    def project_steps(self) -> list[str]:
        return ["gpu/project-ngc-hooks.j2"]

    def aip_mode_prefixes(self) -> list[str]:
        """What NGC's Vertex AI hook may put in front of the command: the full path on its
        release branches, a bare name in older documentation."""
        return [NGC_TRITONSERVER, "tritonserver"]

    def context(self) -> list[ContextItem]:
        return [ContextItem(f"ngc/entrypoint.d/{AIP_MODE_HOOK}",
                            template="gpu/aip-mode-hook.sh.j2")]

"""The operating system layer: the base images, Python, the non-root user."""
from __future__ import annotations

from .base import Component, Stage, User

__all__ = ["CpuSystem", "GpuSystem", "USER", "GPU_USER"]

# The non-root user the server runs as.  NGC's tritonserver images already have
# `triton-server` with uid 1000, so the GPU image uses that one.
USER = User("triton", 1000)
GPU_USER = User("triton-server", 1000)


class CpuSystem(Component):
    name = "system"

    def user(self) -> User:
        return USER

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

    def runtime_packages(self) -> list[str]:
        return []  # NGC's image has Python, the CA bundle and the CUDA libraries

    def build_packages(self) -> list[str]:
        return ["python3-venv"]

    def stages(self) -> list[Stage]:
        return [Stage("runtime-base", "gpu/runtime-base.j2"),
                Stage("builder", "common/builder.j2")]

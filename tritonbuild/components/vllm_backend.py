"""The vLLM backend for Triton: this project's code, copied in as the very last layer."""
from __future__ import annotations

from .base import Component, ContextItem

__all__ = ["VllmBackend"]


class VllmBackend(Component):
    name = "vllm-backend"

    def project_steps(self) -> list[str]:
        return ["common/project-vllm-backend.j2"]

    def context(self) -> list[ContextItem]:
        return [ContextItem("backends/vllm", source=self.plan.repo_root / "backends" / "vllm")]

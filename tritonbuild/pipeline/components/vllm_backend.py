"""The vLLM backend for Triton: this project's code, copied in as the very last layer."""
from __future__ import annotations

from ...ports import PORTS
from .base import Component, ContextItem, Service

__all__ = ["VllmBackend"]


class VllmBackend(Component):
    name = "vllm-backend"

    # Where project-vllm-backend.j2 puts backends/vllm/.
    DIR = "/opt/tritonserver/backends/vllm"

    def project_steps(self) -> list[str]:
        return ["common/project-vllm-backend.j2"]

    def services(self) -> list[Service]:
        # The watch asks over Triton's HTTP endpoint; an image without it has none.
        if not self.plan.has_endpoint("http"):
            return []
        argv = ("env", f"PYTHONPATH={self.DIR}", "python3", "-m", "triton_vllm_backend.watch",
                "--url", f"http://127.0.0.1:{PORTS['http']}")
        why = ("Gives up on tritonserver when a vLLM model's engine or stub dies, or when it",
               "is not ready within START_TIMEOUT_SECONDS: the container then exits, for",
               "`docker run --restart` or Kubernetes to restart it (triton_vllm_backend/watch.py).")
        return [Service("the model watch", argv, why, gives_up_on_the_server=True)]

    def context(self) -> list[ContextItem]:
        return [ContextItem("backends/vllm", source=self.plan.repo_root / "backends" / "vllm")]

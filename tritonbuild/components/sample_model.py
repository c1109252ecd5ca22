"""The sample model: the tiny random Llama made at build time, and a repository serving it."""
from __future__ import annotations

from .base import Component, ContextItem, Stage
from .tritonserver import REPOSITORY_DIR

__all__ = ["SampleModel", "MODEL_DIR", "REPOSITORY_DIR"]

MODEL_DIR = "/opt/models/tiny-llama"


class SampleModel(Component):
    name = "sample-model"
    # Where the model is made, and the repository (the server's default) that serves it.
    model_dir = MODEL_DIR
    repository_dir = REPOSITORY_DIR

    def stages(self) -> list[Stage]:
        return [Stage("sample-model", "common/sample-model.j2")]

    def project_steps(self) -> list[str]:
        return ["common/project-model-repository.j2"]

    def context(self) -> list[ContextItem]:
        # The sample model's configuration is the project's own (model_repository/vllm_model,
        # pointing at MODEL_DIR); other models there need downloads and stay out.
        root = self.plan.repo_root / "model_repository"
        return [
            ContextItem("model_repository/make_tiny_model.py", source=root / "make_tiny_model.py"),
            ContextItem("sample_repository/vllm_model", source=root / "vllm_model"),
        ]

"""A model baked into the image (--serve-model): its folder, and the repository the
image's own `serve` makes for it during the build, which the image then serves."""
from __future__ import annotations

from .base import Component, ContextItem

__all__ = ["ServedModel", "SERVED_MODELS_DIR", "SERVED_DIR"]

SERVED_MODELS_DIR = "/opt/models"
# Where serve writes model_repository/ and frontend.args (the entrypoint's defaults then).
SERVED_DIR = "/opt/triton-vllm/served"


class ServedModel(Component):
    name = "served-model"
    served_dir = SERVED_DIR
    models_dir = SERVED_MODELS_DIR

    @property
    def model_dir(self) -> str:
        return f"{SERVED_MODELS_DIR}/{self.plan.serve_model.value.name}"

    @property
    def serve_args(self) -> tuple[str, ...]:
        return (self.served_dir, self.model_dir, *self.plan.serve_model_args.value)

    def env(self) -> list[tuple[str, str]]:
        return [("MODEL_REPOSITORY", f"{SERVED_DIR}/model_repository"),
                ("FRONTEND_ARGS_FILE", f"{SERVED_DIR}/frontend.args")]

    def project_steps(self) -> list[str]:
        return ["common/project-served-model.j2"]

    def context(self) -> list[ContextItem]:
        return [ContextItem(f"served_model/{self.plan.serve_model.value.name}",
                            source=self.plan.serve_model.value)]

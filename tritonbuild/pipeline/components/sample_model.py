"""The sample model: the tiny random Llama made at build time, and a repository serving it."""
from __future__ import annotations

import json

from .base import Component, ContextItem, Stage
from .tritonserver import REPOSITORY_DIR

__all__ = ["SampleModel", "MODEL_DIR", "REPOSITORY_DIR", "GPU_MEMORY_UTILIZATION"]

MODEL_DIR = "/opt/models/tiny-llama"
# vLLM's default takes 90 % of the GPU for one engine, which leaves no room for a second
# model (or instance) in the same server; the sample model needs a sliver.
GPU_MEMORY_UTILIZATION = 0.2


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
        items = [ContextItem("model_repository/make_tiny_model.py",
                             source=root / "make_tiny_model.py")]
        if not self.plan.gpu:
            return items + [ContextItem("sample_repository/vllm_model",
                                        source=root / "vllm_model")]
        # The GPU image's copy sets a small GPU memory share (the CPU engine sizes its
        # KV cache from VLLM_CPU_KVCACHE_SPACE instead).
        model_json = root / "vllm_model" / "1" / "model.json"
        try:
            engine_args = json.loads(model_json.read_text())
        except (OSError, ValueError):
            return items + [ContextItem("sample_repository/vllm_model/1/model.json",
                                        source=model_json)]  # check_sources reports it
        engine_args.setdefault("gpu_memory_utilization", GPU_MEMORY_UTILIZATION)
        return items + [
            ContextItem("sample_repository/vllm_model/config.pbtxt",
                        source=root / "vllm_model" / "config.pbtxt"),
            ContextItem("sample_repository/vllm_model/1/model.json",
                        text=json.dumps(engine_args, indent=2) + "\n"),
        ]

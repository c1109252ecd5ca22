"""The vLLM engine in a virtual environment built in a stage of its own."""
from __future__ import annotations

from .. import pins
from .base import Component, PipStep, Stage

__all__ = ["VllmEngine"]


class VllmEngine(Component):
    name = "vllm"

    def stages(self) -> list[Stage]:
        return [Stage("venv", "common/venv.j2")]

    def pip_steps(self) -> list[PipStep]:
        plan = self.plan
        engine = f"{plan.vllm_package.value}=={plan.vllm_version.value}"
        steps: list[PipStep] = []
        if not plan.has_backend("vllm"):
            pass  # a Python-backend-only image: its venv holds numpy only
        elif plan.gpu:
            steps.append(PipStep((engine,), "vLLM with its CUDA torch", find_links=True))
        else:
            torch = f"torch=={pins.get('python_packages.torch_cpu')}"
            steps.append(PipStep((torch, engine),
                                 "vLLM's CPU build needs this exact +cpu torch (wheelhouse)",
                                 find_links=True))
        # After vLLM: its opencv pin wants numpy 2, but Triton's Python backend stub
        # crashes on BYTES tensors with numpy 2; the text path runs fine on 1.26.
        steps.append(PipStep((f"numpy=={pins.get('python_packages.numpy')}",),
                             "numpy<2 for Triton's Python backend"))
        return steps

    def pip_uninstall(self) -> list[str]:
        if self.plan.gpu or not self.plan.has_backend("vllm"):
            return []
        # PyPI's torchvision/torchaudio are CUDA builds that break transformers beside the
        # CPU torch; `triton` (the compiler, ~1 GB) is unused by vLLM on the CPU; opencv
        # (150 MB) only decodes video, and vLLM stands a placeholder in for it when absent.
        return ["torchvision", "torchaudio", "torchcodec", "triton", "opencv-python-headless"]

    def image_packages(self) -> list[str]:
        # torch's inductor compiles vLLM's CPU model code at start-up: a C++ compiler and
        # Python's headers.
        if self.plan.gpu or not self.plan.has_backend("vllm"):
            return []
        return ["g++", f"libpython{self.plan.python_version.value}-dev"]

    def env(self) -> list[tuple[str, str]]:
        env = [("HF_HUB_OFFLINE", "1")]
        if not self.plan.gpu:
            # GiB of KV cache: enough for the sample model; raise it for real models.
            env.append(("VLLM_CPU_KVCACHE_SPACE", "1"))
        return env

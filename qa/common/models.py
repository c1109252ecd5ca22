"""Test models and model repositories for the vLLM backend."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

# The backend's own account of the parameters clients discover a model by.
from triton_vllm_backend.stub.engine_config import published_parameters

REPO_ROOT = Path(__file__).resolve().parents[2]
MAKE_TINY_MODEL = REPO_ROOT / "model_repository" / "make_tiny_model.py"


def cache_home() -> Path:
    return Path(os.environ.get("TVB_HOME", Path.home() / ".cache" / "triton-vllm-build"))


def tiny_model_path() -> Path:
    """Return the tiny test model, making it the first time.

    The cache key is a hash of make_tiny_model.py, so a change to the recipe makes a new
    model instead of reusing a stale one.  A file lock lets parallel test sessions share it.
    """
    digest = hashlib.sha256(MAKE_TINY_MODEL.read_bytes()).hexdigest()[:12]
    home = cache_home()
    home.mkdir(parents=True, exist_ok=True)
    target = home / f"tiny-model-{digest}"
    if (target / "config.json").exists():
        return target
    with open(home / ".tiny-model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").exists():
            return target
        tmp = home / f"tiny-model-{digest}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        # A subprocess keeps torch/transformers out of the test process.
        subprocess.run([sys.executable, str(MAKE_TINY_MODEL), str(tmp)], check=True,
                       stdout=subprocess.DEVNULL)
        # Written apart and renamed, so a half-made model is never seen as done.
        tmp.rename(target)
    return target


# On a GPU, vLLM takes 90 % of the memory for one engine by default: suites load several
# models (and instances) into one server, each needs a sliver.
GPU_MEMORY_UTILIZATION = 0.15


def gpu_count() -> int:
    """NVIDIA GPUs on this machine (0 without nvidia-smi)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def gpu_defaults() -> dict:
    """Engine arguments every test model gets on a machine with an NVIDIA GPU."""
    if gpu_count() == 0:
        return {}
    return {"gpu_memory_utilization": GPU_MEMORY_UTILIZATION}


# Test models run eager, as the image's sample model does: compiling the tiny model costs
# 15-35 s a start on 2 cores (on the CPU, vLLM 0.32 compiles again at every start) and
# tests nothing of ours.  A test that wants the compile passes "enforce_eager": False.
TEST_ENGINE_DEFAULTS = {"enforce_eager": True}

CONFIG_PBTXT = """\
backend: "vllm"
instance_group [
  {{
    count: 1
    kind: {kind}
  }}
]
{parameters}{extra}
"""


def write_vllm_model(repository: Path | str, name: str, engine_args: dict, *,
                     parameters: dict[str, str] | None = None, kind: str = "KIND_MODEL",
                     publish: bool = True, config_extra: str = "",
                     files: dict[str, str] | None = None) -> Path:
    """Write one vLLM-backend model: `config.pbtxt` and `1/model.json` (+ extra files in 1/).

    The config is minimal on purpose: the backend's auto-complete fills in the inputs,
    outputs, batching and decoupled policy.  `publish` adds the discovery parameters
    (vllm_model, vllm_runner, vllm_max_model_len); `parameters` adds others, e.g.
    {"REPORT_CUSTOM_METRICS": "true"}.
    """
    model_dir = Path(repository) / name
    version = model_dir / "1"
    version.mkdir(parents=True, exist_ok=True)
    engine_args = {**gpu_defaults(), **TEST_ENGINE_DEFAULTS, **engine_args}
    values = dict(published_parameters(engine_args) if publish else {})
    values.update(parameters or {})
    lines = "".join(f'parameters: {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n'
                    for k, v in values.items())
    (model_dir / "config.pbtxt").write_text(
        CONFIG_PBTXT.format(kind=kind, parameters=lines, extra=config_extra))
    (version / "model.json").write_text(json.dumps(engine_args, indent=2) + "\n")
    for filename, text in (files or {}).items():
        (version / filename).write_text(text)
    return model_dir


def write_model_repository(repository: Path | str, models: dict[str, dict],
                           **options) -> Path:
    """Write a repository of vLLM-backend models: `{name: engine_args}`; `options` go to
    write_vllm_model for every model."""
    repository = Path(repository)
    repository.mkdir(parents=True, exist_ok=True)
    for name, engine_args in models.items():
        write_vllm_model(repository, name, engine_args, **options)
    return repository


def make_tiny_lora(outdir: Path, rank: int = 8, seed: int = 0) -> Path:
    """A LoRA adapter (PEFT layout) for the tiny model's attention projections, with
    random weights large enough to change its greedy output."""
    import torch
    from safetensors.torch import save_file

    outdir.mkdir(parents=True, exist_ok=True)
    hidden, layers = 128, 2
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(layers):
        for proj in ("q_proj", "v_proj"):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, hidden, generator=generator)
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(hidden, rank, generator=generator)
    save_file(tensors, str(outdir / "adapter_model.safetensors"))
    (outdir / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
        "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"], "bias": "none",
        "fan_in_fan_out": False, "modules_to_save": None, "use_rslora": False,
        "use_dora": False, "base_model_name_or_path": None,
    }))
    return outdir

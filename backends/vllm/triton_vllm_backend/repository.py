"""Write a Triton model repository for vLLM models: `config.pbtxt` and `1/model.json` each.

Pure: a `ModelSpec` (the Triton model name and vLLM engine arguments) in, file texts out.
`serve` (the image's entrypoint), `build.py --serve-model` and the Helm chart all make
their repositories here, and the sample repository in `model_repository/` is this
module's output (a test checks it), so that every path to a repository gives the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .stub.engine_config import MODEL_JSON, published_parameters, runner_of
from .stub.wire import POOLING

__all__ = ["ModelSpec", "RepositoryError", "model_files", "repository_files",
           "write_repository", "triton_name"]

CONFIG_PBTXT = "config.pbtxt"
VERSION = "1"
# Triton names a model by its folder; keep it to characters every filesystem and URL takes.
# fullmatch: `$` would also match before a final line break, and "llm\n" is no folder name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class RepositoryError(ValueError):
    """The models cannot make a repository (bad name, two models of one name)."""


@dataclass(frozen=True)
class ModelSpec:
    """One model: its Triton name and the engine arguments model.json holds ("model" first)."""
    name: str
    engine_args: dict = field(default_factory=dict)

    @property
    def report_metrics(self) -> bool:
        # vLLM's statistics go to Triton's metrics endpoint unless the user turned them off.
        return self.engine_args.get("disable_log_stats") is False


def triton_name(model: str) -> str:
    """The Triton name of a model folder or hub id that names none itself: its last part,
    with characters outside [A-Za-z0-9_.-] made `_`."""
    last = model.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", last).lstrip("_.-")
    if not name:
        raise RepositoryError(f"cannot name a Triton model after {model!r}: give "
                              f"--served-model-name")
    return name


_GENERATE_HEAD = """\
# A vLLM model for Triton.  The backend's auto-complete adds the inputs, outputs,
# max_batch_size 0 and the decoupled transaction policy, so this is all a model needs.
backend: "vllm"

# KIND_MODEL: vLLM places its own workers (one instance; vLLM batches in flight).
"""
_POOLING_HEAD = """\
# An embedding model: model.json's "runner": "pooling" makes the backend answer each
# text_input (or input_ids) with an `embedding` output instead of generated text.
backend: "vllm"

"""
_INSTANCE_GROUP = """\
instance_group [
  {
    count: 1
    kind: KIND_MODEL
  }
]

"""
_PUBLISHED_WHY = """\
# What clients (the OpenAI frontend) read to discover the model.  Triton keeps only
# the parameters written here, so they repeat model.json; the backend refuses to load
# when they disagree with it.
"""
_METRICS = """
# Publish vLLM's statistics on Triton's metrics endpoint (needs "disable_log_stats": false).
parameters: { key: "REPORT_CUSTOM_METRICS" value: { string_value: "true" } }
"""


def _parameter(key: str, value: str) -> str:
    return f"parameters: {{ key: {json.dumps(key)} value: {{ string_value: {json.dumps(value)} }} }}\n"


def config_pbtxt(spec: ModelSpec) -> str:
    pooling = runner_of(spec.engine_args) == POOLING
    text = (_POOLING_HEAD if pooling else _GENERATE_HEAD) + _INSTANCE_GROUP
    if not pooling:
        text += _PUBLISHED_WHY
    text += "".join(_parameter(k, v) for k, v in published_parameters(spec.engine_args).items())
    if spec.report_metrics:
        text += _METRICS
    return text


def model_json(spec: ModelSpec) -> str:
    return json.dumps(spec.engine_args, indent=2) + "\n"


def model_files(spec: ModelSpec) -> dict[str, str]:
    """A model's files, relative to its folder in the repository."""
    if not _NAME.fullmatch(spec.name):
        raise RepositoryError(f"{spec.name!r} is not a Triton model name (letters, digits, "
                              f"'_', '.', '-'; not first '_', '.' or '-')")
    if not isinstance(spec.engine_args.get("model"), str):
        raise RepositoryError(f"model {spec.name}: the engine argument 'model' is required")
    return {CONFIG_PBTXT: config_pbtxt(spec), f"{VERSION}/{MODEL_JSON}": model_json(spec)}


def repository_files(specs: list[ModelSpec]) -> dict[str, str]:
    """Every file of the repository, relative to its root."""
    seen: set[str] = set()
    files: dict[str, str] = {}
    for spec in specs:
        if spec.name in seen:
            raise RepositoryError(f"two models are named {spec.name!r}: give each its own "
                                  f"--served-model-name")
        seen.add(spec.name)
        files.update({f"{spec.name}/{rel}": text for rel, text in model_files(spec).items()})
    return files


def write_repository(specs: list[ModelSpec], root: Path | str) -> Path:
    """Write the repository under `root` (made if missing; models already there are replaced)."""
    root = Path(root)
    for rel, text in repository_files(specs).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root

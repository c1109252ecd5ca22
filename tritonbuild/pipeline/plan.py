"""The build plan: every decision build.py made, and where each value came from.

A plan is immutable; validate.py makes it from the flags, render.py and engine.py only
read it.  Each value is a Sourced: the value plus its source, one of
  "flag"     the user gave it on the command line,
  "default"  build.py's default (versions.toml for versions),
  "implied"  another flag implies it (vllm implies python, --enable-all...),
  "host"     found on this machine (pip's CA bundle, pip's wheel folder).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..ports import PORTS

__all__ = ["Sourced", "Backend", "Secret", "BuildPlan", "SOURCES", "Feature", "FEATURES"]

T = TypeVar("T")
SOURCES = ("flag", "default", "implied", "host")


@dataclass(frozen=True)
class Sourced(Generic[T]):
    value: T
    source: str
    # Why the value is what it is, when that is not obvious (shown in plan.json).
    reason: str = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}")


@dataclass(frozen=True)
class Backend:
    name: str
    tag: str | None = None


@dataclass(frozen=True)
class Secret:
    id: str
    src: Path


@dataclass(frozen=True)
class Feature:
    """A server feature switched on by `--enable-NAME` (and by --enable-all)."""
    name: str                       # the flag's suffix, and the word in the image's label
    help: str
    needs: tuple[str, ...] = ()     # other features it needs
    gpu_only: bool = False

    @property
    def flag(self) -> str:
        return f"--enable-{self.name}"

    @property
    def field(self) -> str:
        """The BuildPlan field holding it."""
        return self.name.replace("-", "_")


# The one list of server features: flags, rules, plan fields and labels all come from it.
FEATURES = (
    Feature("logging", "info-level server logs (else warnings and errors only)"),
    Feature("stats", "open the statistics API (else it needs $TRITON_STATISTICS_KEY)"),
    Feature("tracing", "trace requests to /tmp/triton-trace.json"),
    Feature("metrics", f"Prometheus metrics on port {PORTS['metrics']}"),
    Feature("gpu-metrics", "GPU metrics (needs --enable-metrics and --enable-gpu)",
            needs=("metrics",), gpu_only=True),
    Feature("cpu-metrics", "CPU metrics (needs --enable-metrics)", needs=("metrics",)),
)


@dataclass(frozen=True)
class BuildPlan:
    flavor: Sourced[str]                        # "cpu" or "gpu"
    backends: Sourced[tuple[Backend, ...]]
    endpoints: Sourced[tuple[str, ...]]
    filesystems: Sourced[tuple[str, ...]]
    # One per entry of FEATURES, in its order (a test checks that they agree).
    logging: Sourced[bool]
    stats: Sourced[bool]
    tracing: Sourced[bool]
    metrics: Sourced[bool]
    gpu_metrics: Sourced[bool]
    cpu_metrics: Sourced[bool]
    upstream_container_version: Sourced[str]
    container_version: Sourced[str]
    base_image: Sourced[str]                    # FROM of the build stages
    inference_image: Sourced[str]               # FROM of the final stage
    build_dir: Sourced[Path]
    dryrun: Sourced[bool]
    progress: Sourced[str]                      # auto, plain or quiet
    secrets: Sourced[tuple[Secret, ...]]
    tag: Sourced[str]
    pip_index_url: Sourced[str | None]
    pip_extra_index_urls: Sourced[tuple[str, ...]]
    wheelhouse: Sourced[Path | None]
    no_cache: Sourced[bool]
    # A model baked into the image (--serve-model) and vllm serve's flags for it.
    serve_model: Sourced[Path | None]
    serve_model_args: Sourced[tuple[str, ...]]
    vllm_package: Sourced[str]
    vllm_version: Sourced[str]
    python_version: Sourced[str]
    # Whether the release's Python backend needs numpy < 2 (versions.toml [ngc]).
    numpy_below_2: Sourced[bool]
    # The GPU environment's lock (pip constraints file in the checkout), when one fits.
    constraints: Sourced[Path | None]
    # Every pinned version the image carries, by versions.toml key ("vllm.cpu_version").
    pins: Sourced[tuple[tuple[str, str], ...]]
    repo_root: Path = field(compare=False)
    # What build.py tells the user about its decisions ("vllm implies python").
    notes: tuple[str, ...] = ()

    # -- convenience views used by the components and templates ---------------------------
    @property
    def gpu(self) -> bool:
        return self.flavor.value == "gpu"

    def has_backend(self, name: str) -> bool:
        return any(b.name == name for b in self.backends.value)

    def features(self) -> list[str]:
        """Names of the features switched on, in the order of FEATURES."""
        return [f.name for f in FEATURES if getattr(self, f.field).value]

    def has_endpoint(self, name: str) -> bool:
        return name in self.endpoints.value

    def pin(self, key: str) -> str:
        return dict(self.pins.value)[key]

    def to_json(self) -> str:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Sourced):
                entry = {"value": _plain(value.value), "source": value.source}
                if value.reason:
                    entry["reason"] = value.reason
                out[f.name] = entry
        out["notes"] = list(self.notes)
        return json.dumps(out, indent=2, sort_keys=False) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Backend):
        return f"{value.name}:{value.tag}" if value.tag else value.name
    if isinstance(value, Secret):
        return {"id": value.id, "src": str(value.src)}
    if isinstance(value, tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {k: _plain(v) for k, v in value}
        return [_plain(v) for v in value]
    return value

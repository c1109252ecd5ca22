"""Render a plan into text: the Dockerfile and the files the image gets from the context.

Pure: a plan in, strings out.  The templates live under dockerfiles/, one per stage or
component; the components decide what goes into them.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .components import ContextItem, PipStep, Stage, compose
from .components.sample_model import MODEL_DIR, REPOSITORY_DIR
from .components.system import UID
from .components.tritonserver import server_args
from .plan import BuildPlan

__all__ = ["render", "Rendered", "TEMPLATE_DIR", "LABEL_PREFIX", "labels"]

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "dockerfiles"
LABEL_PREFIX = "io.triton-vllm"


@dataclass(frozen=True)
class Rendered:
    dockerfile: str
    # Build-context files made from templates: path in the context -> (text, executable).
    files: dict[str, tuple[str, bool]]
    # Build-context files and folders copied from the checkout.
    copies: tuple[ContextItem, ...]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,       # a typo in a template fails the render
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["shquote"] = shlex.quote
    env.filters["json"] = lambda v: json.dumps(v)
    return env


def labels(plan: BuildPlan, extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """OCI labels: what the image is, every pinned version, and the flags' choices."""
    out = [
        ("org.opencontainers.image.title", "Triton Inference Server with vLLM"),
        ("org.opencontainers.image.version", plan.container_version.value),
        ("org.opencontainers.image.base.name", plan.inference_image.value),
        (f"{LABEL_PREFIX}.flavor", plan.flavor.value),
        (f"{LABEL_PREFIX}.backends", ",".join(b.name for b in plan.backends.value)),
        (f"{LABEL_PREFIX}.endpoints", ",".join(plan.endpoints.value)),
        (f"{LABEL_PREFIX}.filesystems", ",".join(plan.filesystems.value)),
    ]
    features = [f for f in ("logging", "stats", "tracing", "metrics", "gpu_metrics", "cpu_metrics")
                if getattr(plan, f).value]
    out.append((f"{LABEL_PREFIX}.features", ",".join(f.replace("_", "-") for f in features)))
    for b in plan.backends.value:
        if b.tag:
            out.append((f"{LABEL_PREFIX}.backend.{b.name}.tag", b.tag))
    for name, version in plan.pins.value + tuple(extra):
        out.append((f"{LABEL_PREFIX}.version.{name}", version))
    return out


def render(plan: BuildPlan) -> Rendered:
    parts = compose(plan)
    env = _environment()

    stages: list[Stage] = [s for p in parts for s in p.stages()]
    pip_steps: list[PipStep] = [s for p in parts for s in p.pip_steps()]
    extra_versions = [kv for p in parts for kv in p.labels()]
    ctx = {
        "plan": plan,
        "stage_names": [s.name for s in stages],
        "runtime_packages": sorted({x for p in parts for x in p.runtime_packages()}),
        "build_packages": sorted({x for p in parts for x in p.build_packages()}),
        "image_packages": sorted({x for p in parts for x in p.image_packages()}),
        "pip_steps": pip_steps,
        "pip_uninstall": [x for p in parts for x in p.pip_uninstall()],
        "env": [kv for p in parts for kv in p.env()],
        "ports": sorted({x for p in parts for x in p.ports()}),
        "labels": labels(plan, extra_versions),
        "project_steps": [t for p in parts for t in p.project_steps()],
        "user": parts[0].user,  # type: ignore[attr-defined]
        "entrypoint": parts[0].entrypoint,  # type: ignore[attr-defined]
        "uid": UID,
        "server_args": server_args(plan),
        "versions": dict(plan.pins.value + tuple(extra_versions)),
        "model_dir": MODEL_DIR,
        "repository_dir": REPOSITORY_DIR,
        "secrets": [s.id for s in plan.secrets.value],
    }
    body = [env.get_template(s.template).render(ctx) for s in stages]
    body.append(env.get_template("common/runtime.j2").render(ctx))
    dockerfile = env.get_template("Dockerfile.j2").render(ctx, stages="\n".join(body))

    files: dict[str, tuple[str, bool]] = {}
    copies: list[ContextItem] = []
    for item in (i for p in parts for i in p.context()):
        if item.template:
            files[item.dest] = (env.get_template(item.template).render(ctx), item.executable)
        elif item.text is not None:
            files[item.dest] = (item.text, item.executable)
        else:
            copies.append(item)
    return Rendered(dockerfile, files, tuple(copies))

"""Render a plan into text: the Dockerfile and the files the image gets from the context.

Pure: a plan in, strings out.  The templates live under dockerfiles/, one per stage or
component; the components decide what goes into them.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from .components import Component, ContextItem, User, compose
from .plan import BuildPlan

__all__ = ["render", "Rendered", "TEMPLATE_DIR", "LABEL_PREFIX", "labels"]

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "dockerfiles"
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
    out.append((f"{LABEL_PREFIX}.features", ",".join(plan.features())))
    for b in plan.backends.value:
        if b.tag:
            out.append((f"{LABEL_PREFIX}.backend.{b.name}.tag", b.tag))
    for name, version in plan.pins.value + tuple(extra):
        out.append((f"{LABEL_PREFIX}.version.{name}", version))
    return out


def _gather(parts: list[Component], hook: str) -> list[Any]:
    """Every component's answer to one hook, in the components' order."""
    return [x for p in parts for x in getattr(p, hook)()]


def _user(parts: list[Component]) -> User:
    users = [u for p in parts if (u := p.user()) is not None]
    if len(users) != 1:
        raise RuntimeError(f"exactly one component must name the image's user, not {users}")
    return users[0]


def _entrypoint(parts: list[Component]) -> list[str]:
    found = [e for p in parts if (e := p.entrypoint()) is not None]
    if len(found) != 1:
        raise RuntimeError(f"exactly one component must name the entrypoint, not {found}")
    return found[0]


def _shared_context(plan: BuildPlan, parts: list[Component]) -> dict[str, Any]:
    """What every template sees: the plan and the components' answers to the hooks."""
    extra_versions = _gather(parts, "labels")
    return {
        "plan": plan,
        "stage_names": [s.name for s in _gather(parts, "stages")],
        "runtime_packages": sorted(set(_gather(parts, "runtime_packages"))),
        "build_packages": sorted(set(_gather(parts, "build_packages"))),
        "image_packages": sorted(set(_gather(parts, "image_packages"))),
        "pip_steps": _gather(parts, "pip_steps"),
        "pip_uninstall": _gather(parts, "pip_uninstall"),
        "env": _gather(parts, "env"),
        "ports": sorted(set(_gather(parts, "ports"))),
        "labels": labels(plan, extra_versions),
        "user": _user(parts),
        "entrypoint": _entrypoint(parts),
        "server_args": _gather(parts, "server_args"),
        "server_preload": _gather(parts, "server_preload"),
        "services": _gather(parts, "services"),
        "in_process_server": next((c for p in parts if (c := p.in_process_server())), ()),
        "versions": dict(plan.pins.value + tuple(extra_versions)),
        "secrets": [s.id for s in plan.secrets.value],
    }


def render(plan: BuildPlan) -> Rendered:
    parts = compose(plan)
    env = _environment()
    ctx = _shared_context(plan, parts)

    def own(part: Component, template: str) -> str:
        # A component's own templates see it as `component`.
        return env.get_template(template).render(ctx, component=part)

    ctx["project_steps"] = [own(p, t) for p in parts for t in p.project_steps()]
    body = [own(p, s.template) for p in parts for s in p.stages()]
    body.append(env.get_template("common/runtime.j2").render(ctx))
    dockerfile = env.get_template("Dockerfile.j2").render(ctx, stages="\n".join(body))

    files: dict[str, tuple[str, bool]] = {}
    copies: list[ContextItem] = []
    for part, item in ((p, i) for p in parts for i in p.context()):
        if item.template:
            files[item.dest] = (own(part, item.template), item.executable)
        elif item.text is not None:
            files[item.dest] = (item.text, item.executable)
        else:
            copies.append(item)
    return Rendered(dockerfile, files, tuple(copies))

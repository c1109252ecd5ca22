"""Write the build directory: the Dockerfile, build.sh, plan.json and the build context.

The context is staged (not the whole checkout): only what the Dockerfile copies or
bind-mounts, so that unrelated edits never reach the engine, and the wheelhouse can
come from outside the checkout without `--build-context` (which needs buildx).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import SourceError
from .plan import BuildPlan
from .render import Rendered

__all__ = ["BuildFiles", "check_sources", "write_build_dir"]

# Never part of the context: caches and build outputs of the checkout.
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache",
                                ".mypy_cache", ".ruff_cache", "build", "dist")


@dataclass(frozen=True)
class BuildFiles:
    dockerfile: Path
    build_script: Path
    plan_json: Path
    context: Path


def check_sources(rendered: Rendered) -> None:
    """Fail, before anything is written, when the checkout lacks what the image copies."""
    for item in rendered.copies:
        if item.source is None or not item.source.exists():
            raise SourceError(f"the image needs {item.source}, which is missing from the checkout")


def _link_or_copy(src: str, dst: str) -> None:
    # Hard links make staging a large wheelhouse instant; copy across file systems.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _replace(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o755 if executable else 0o644)
    tmp.replace(path)


def write_build_dir(plan: BuildPlan, rendered: Rendered, build_script: str) -> BuildFiles:
    root = plan.build_dir.value
    root.mkdir(parents=True, exist_ok=True)
    # The build directory defaults to build/ in the checkout: keep it out of git.
    if not (root / ".gitignore").exists():
        _replace(root / ".gitignore", "*\n")
    context = root / "context"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir()
    for dest, (text, executable) in rendered.files.items():
        _replace(context / dest, text, executable)
    for item in rendered.copies:
        assert item.source is not None
        target = context / item.dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.source.is_dir():
            shutil.copytree(item.source, target, ignore=IGNORE)
        else:
            shutil.copy2(item.source, target)
    if plan.wheelhouse.value is not None:
        shutil.copytree(plan.wheelhouse.value, context / "wheelhouse",
                        copy_function=_link_or_copy, ignore=IGNORE)
    files = BuildFiles(root / "Dockerfile", root / "build.sh", root / "plan.json", context)
    _replace(files.dockerfile, rendered.dockerfile)
    _replace(files.build_script, build_script, executable=True)
    _replace(files.plan_json, plan.to_json())
    return files

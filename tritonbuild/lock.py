"""What the GPU image's lock (requirements/gpu/<release>.txt) is resolved from.

The lock is a pip constraints file for the venv stage of the GPU image, made by
`scripts/lock_gpu.py` with `uv pip compile` for the release's Python on manylinux
x86_64, from package metadata only (no CUDA wheel is downloaded or installed).  Its
header records the inputs, so a test can tell, offline, that a lock is stale.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

from . import pins

__all__ = ["lock_inputs", "locked_versions", "recorded_inputs", "PLATFORM", "INPUTS_MARK"]

# NGC's tritonserver images are Ubuntu 24.04 (glibc 2.39) on x86_64.
PLATFORM = "x86_64-manylinux_2_39"
INPUTS_MARK = "# input: "
FRONTEND_PYPROJECT = pins.VERSIONS_FILE.parent / "frontends" / "openai" / "pyproject.toml"


def lock_inputs(release: str) -> list[str]:
    """The requirements the lock of `release` is resolved from, in a stable order."""
    row = pins.ngc_release(release)
    if row is None or "vllm" not in row:
        raise KeyError(f"versions.toml [ngc] has no vLLM pairing for {release}")
    with open(FRONTEND_PYPROJECT, "rb") as f:
        frontend = tomllib.load(f)["project"]["dependencies"]
    out = [f"{pins.get('vllm.gpu_package')}=={row['vllm']}"]
    out += list(row.get("lock_caps", []))
    out += list(frontend)
    if row["numpy_below_2"]:
        out.append(f"numpy=={pins.get('python_packages.numpy')}")
    return out


def recorded_inputs(lock: Path) -> list[str]:
    return [line[len(INPUTS_MARK):].strip() for line in lock.read_text().splitlines()
            if line.startswith(INPUTS_MARK)]


def locked_versions(lock: Path) -> dict[str, str]:
    """name (normalized) -> version of every `name==version` line of a lock."""
    out = {}
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_normalize(name.split("[", 1)[0])] = version.split(";", 1)[0].strip()
    return out


def _normalize(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")

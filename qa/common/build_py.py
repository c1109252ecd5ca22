"""The repository's `./build.py`, run as a user runs it: from the checkout's root, with the
interpreter running the tests (or the benchmark), into a build folder of the caller's.

    out = run_build_py(*CPU_IMAGE_FLAGS, "--tag=t:x", "-q", build_dir=tmp / "build")
    assert out.returncode == 0, build_failure(out)
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_PY = REPO / "build.py"

# The project's CPU image as qa/L0_build_image builds it: the suites that build an image
# of their own from it use the same flags, so that BuildKit's cache makes theirs cheap.
CPU_IMAGE_FLAGS = ("--backend=vllm", "--endpoint=openai", "--enable-metrics")


def run_build_py(*flags: str, build_dir: Path | str, timeout: float | None = 1800,
                 env: Mapping[str, str] | None = None,
                 capture: bool = True) -> subprocess.CompletedProcess:
    """`./build.py FLAGS --build-dir=BUILD_DIR`; its exit status is the caller's to check.

    timeout: seconds (None: as long as it takes, for a benchmark that times it).
    env: its whole environment (default: this process's).
    capture: keep its output (text) for the caller to read; otherwise it goes straight to
        this process's own output, as a long build's progress should."""
    argv = [sys.executable, str(BUILD_PY), *flags, f"--build-dir={build_dir}"]
    return subprocess.run(argv, cwd=REPO, env=None if env is None else dict(env),
                          capture_output=capture, text=True, timeout=timeout)


def build_failure(out: subprocess.CompletedProcess) -> str:
    """A failed run's message: the command, its exit status and the end of its output."""
    printed = (out.stdout or "") + (out.stderr or "")
    return f"{' '.join(out.args)} failed ({out.returncode}):\n{printed[-4000:]}"

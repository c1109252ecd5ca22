"""The frontend's compiled part (setup.py: triton/_capi_shim.c) is required: a build
that cannot compile it fails, rather than making a wheel whose in-process mode dies at
start (the image builds it where the compiler is: tests/tritonbuild's test_components)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FRONTEND = Path(__file__).resolve().parents[3] / "frontends" / "openai"


def test_a_build_without_a_c_compiler_fails(tmp_path):
    source = tmp_path / "openai"
    shutil.copytree(FRONTEND, source, ignore=shutil.ignore_patterns("*.so", "build", "*.egg-info",
                                                                    "__pycache__"))
    out = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib",
                          str(tmp_path / "lib"), "--build-temp", str(tmp_path / "tmp")],
                         cwd=source, env={"PATH": "/usr/bin:/bin", "CC": "/bin/false"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0, out.stdout + out.stderr
    assert not list((tmp_path / "lib").rglob("_capi_shim*.so"))


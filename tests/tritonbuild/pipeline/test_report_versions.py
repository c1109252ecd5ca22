"""The image's `versions` command reports packages changed after the build."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tritonbuild.pipeline.render import render


@pytest.fixture
def report(plan_for, tmp_path):
    """Run the rendered report_versions.py with PINS as the image's versions.json."""
    script = tmp_path / "report_versions.py"
    script.write_text(render(plan_for()).files["image/report_versions.py"][0])

    def run(pins: dict[str, str], *argv: str, env=None) -> subprocess.CompletedProcess:
        (tmp_path / "v.json").write_text(json.dumps(pins))
        env = {**os.environ, **(env or {}), "TRITON_VLLM_VERSIONS": str(tmp_path / "v.json")}
        return subprocess.run([sys.executable, str(script), *argv], env=env,
                              capture_output=True, text=True)
    return run


PIP = metadata.version("pip")
NUMPY = metadata.version("numpy")


def test_matching_pins_pass(report):
    out = report({"pip": PIP, "numpy": NUMPY, "tritonserver": "2.51.0"})
    assert out.returncode == 0, out.stdout
    assert "changed" not in out.stdout


def test_upgraded_package_is_reported(report):
    out = report({"pip": "0.0.1", "numpy": NUMPY, "tritonserver": "2.51.0"})
    assert out.returncode == 1
    assert out.stdout.endswith(f"changed since this image was built:\n"
                               f"  pip: 0.0.1 pinned, {PIP} installed\n")


def test_removed_package_is_reported_not_skipped(report):
    out = report({"vllm-cpu-gone": "0.32.0", "pip": PIP}, "--json")
    assert out.returncode == 1
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["vllm-cpu-gone"] == {"name": "vllm-cpu-gone", "pinned": "0.32.0",
                                     "installed": None, "status": "missing"}
    assert rows["pip"]["status"] == "ok"
    text = report({"vllm-cpu-gone": "0.32.0"}).stdout
    assert "  vllm-cpu-gone: 0.32.0 pinned, not installed\n" in text


def test_server_and_base_pins_are_not_packages(report):
    out = report({"tritonserver": "2.51.0", "nvidia-pytriton": "0.7.0",
                  "triton-release": "24.10", "base-image": "local/debian:bookworm"}, "--json")
    assert out.returncode == 0
    assert {r["status"] for r in json.loads(out.stdout)} == {"not checked"}


def test_second_vllm_distribution_is_reported(report):
    # The test environment holds vllm-cpu; an image pinned to `vllm` sees it as added.
    out = report({"vllm": "0.11.0"})
    assert out.returncode == 1
    assert f"  vllm-cpu: {metadata.version('vllm-cpu')} installed, not pinned" in out.stdout
    assert "  vllm: 0.11.0 pinned, not installed" in out.stdout


def fake_site(tmp_path, **versions: str) -> dict[str, str]:
    """An environment in which importlib.metadata finds these distributions first."""
    site = tmp_path / "site"
    for name, version in versions.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return {"PYTHONPATH": str(site)}


def test_numpy_2_is_named_as_breaking_the_stub(report, tmp_path):
    env = fake_site(tmp_path, numpy="2.2.6")
    out = report({"numpy": "1.26.4", "tritonserver": "2.51.0"}, env=env)
    assert out.returncode == 1
    assert ("  numpy: 1.26.4 pinned, 2.2.6 installed (Triton's Python backend stub here needs "
            "numpy<2)\n") in out.stdout
    newer = report({"numpy": "1.26.4", "triton-release": "25.11"}, env=env)
    assert "  numpy: 1.26.4 pinned, 2.2.6 installed\n" in newer.stdout


def test_vllm_upgrade_in_the_image_is_reported(report, tmp_path):
    env = fake_site(tmp_path, **{"vllm-cpu": "0.33.0"})
    out = report({"vllm-cpu": "0.32.0", "tritonserver": "2.51.0"}, env=env)
    assert out.returncode == 1
    assert "vllm-cpu      0.32.0 (installed: 0.33.0)\n" in out.stdout
    assert out.stdout.endswith("changed since this image was built:\n"
                               "  vllm-cpu: 0.32.0 pinned, 0.33.0 installed\n")


def test_reports_the_cuda_torch_was_built_for(report):
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("no torch in this environment")
    import torch as t
    built = t.version.cuda or "cpu"
    out = report({"torch": torch, "pip": PIP}, "--json")
    assert out.returncode == 0, out.stdout
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["torch"]["status"] == "ok"
    assert rows["torch-cuda"] == {"name": "torch-cuda", "pinned": None, "installed": built,
                                  "status": "info"}
    assert f"torch-cuda  - (torch's CUDA build: {built})" in report({"torch": torch}).stdout
    # Without torch pinned (a Python-backend-only image) there is no such row.
    assert "torch-cuda" not in report({"pip": PIP}).stdout


def test_vllm_cpus_own_name_is_no_second_vllm(report, tmp_path):
    # The build writes a `vllm` distribution beside vllm-cpu (triton_vllm_backend.vllm_dist)
    # for vLLM's command line: vllm-cpu under another name, not a second package.
    from triton_vllm_backend import vllm_dist
    env = fake_site(tmp_path, **{"vllm-cpu": "0.32.0"})
    vllm_dist.write_alias(Path(env["PYTHONPATH"]), "0.32.0")
    out = report({"vllm-cpu": "0.32.0"}, "--json", env=env)
    assert out.returncode == 0, out.stdout
    assert [r["name"] for r in json.loads(out.stdout)] == ["vllm-cpu"]
    # An image pinned to `vllm` has no such package, whatever the name says.
    out = report({"vllm": "0.32.0+cpu"}, env=env)
    assert "  vllm: 0.32.0+cpu pinned, not installed" in out.stdout


def test_the_image_knows_the_installer_of_vllm_cpus_own_name(plan_for):
    from triton_vllm_backend import vllm_dist
    script = render(plan_for()).files["image/report_versions.py"][0]
    assert f'VLLM_NAME_INSTALLER = "{vllm_dist.INSTALLER}"' in script

"""The image's `versions` command (image/report_versions.py), run by this environment's
Python against a versions.json of the pins it has installed."""
import json
import subprocess
import sys
from importlib import metadata

import pytest

from tritonbuild.render import render


@pytest.fixture
def report(plan_for, tmp_path):
    script = tmp_path / "report_versions.py"
    script.write_text(render(plan_for()).files["image/report_versions.py"][0])

    def run(pins, *args):
        (tmp_path / "versions.json").write_text(json.dumps(pins))
        return subprocess.run([sys.executable, str(script), *args], capture_output=True,
                              text=True, env={"TRITON_VLLM_VERSIONS": str(tmp_path / "versions.json")})
    return run


def test_reports_torch_and_its_cuda_build(report):
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("no torch in this environment")
    out = report({"torch": torch, "base-image": "x"}, "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    import torch as t
    assert rows["torch"]["installed"] == torch
    assert rows["torch-cuda"] == {"name": "torch-cuda", "pinned": None,
                                  "installed": t.version.cuda or "cpu"}
    text = report({"torch": torch}).stdout
    assert f"torch-cuda  {t.version.cuda or 'cpu'} (installed)" in text


def test_a_wrong_pin_fails(report):
    out = report({"pip": "0.1"})
    assert out.returncode == 1 and "(installed: " in out.stdout

"""versions.toml's [ngc] table: every row is complete, every pin fits its row, and every
row with a vLLM pairing has a committed lock resolved from today's inputs."""
import re

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tritonbuild import lock, pins
from tritonbuild.render import render

ROWS = pins.ngc_releases()
PAIRED = [r for r, row in ROWS.items() if "vllm" in row]
KEYS = {"server_version", "ubuntu", "python", "cuda", "min_driver", "nvidia_vllm",
        "numpy_below_2"}


@pytest.mark.parametrize("release", ROWS)
def test_rows_are_complete(release):
    row = ROWS[release]
    assert re.fullmatch(r"\d{2}\.(0[1-9]|1[0-2])", release)
    assert KEYS <= set(row), KEYS - set(row)
    assert set(row) <= KEYS | {"vllm", "lock_caps"}, set(row) - KEYS
    assert re.fullmatch(r"3\.\d+", row["python"])
    assert re.fullmatch(r"2\.\d+\.\d+", row["server_version"])
    assert re.fullmatch(r"\d{3}", row["min_driver"])
    assert isinstance(row["numpy_below_2"], bool)
    # The Python backend takes numpy 2 from 24.11 on.
    assert row["numpy_below_2"] == (release < "24.11")


@pytest.mark.parametrize("release", PAIRED)
def test_paired_vllm_runs_the_backend(release):
    row = ROWS[release]
    # The backend drives vLLM's v1 engine (AsyncLLM), which 0.11 is the first to carry alone.
    assert Version(row["vllm"]) >= Version("0.11.0")
    # vLLM's CUDA 13 builds (torch 2.9 on) need driver R580; the NGC image's CUDA needs it too.
    assert int(row["min_driver"]) >= 580 and row["cuda"].startswith("13.")


def test_pins_fit_the_table():
    cpu_release = pins.get("triton.upstream_container_version")
    gpu_release = pins.get("triton.gpu_upstream_container_version")
    # The CPU image's Triton is nvidia-pytriton's server, which is that release's.
    assert ROWS[cpu_release]["server_version"] == pins.get("triton.server_version")
    # Its Python backend needs numpy<2, and the pinned numpy is one.
    assert ROWS[cpu_release]["numpy_below_2"]
    assert Version(pins.get("python_packages.numpy")) < Version("2")
    # The GPU image's default release has a pairing.
    assert gpu_release in PAIRED


@pytest.mark.parametrize("release", PAIRED)
def test_lock_is_committed_and_fresh(release):
    path = pins.gpu_lock_path(release)
    assert path.is_file(), f"no lock for {release}: run scripts/lock_gpu.py {release}"
    # Resolved from exactly today's inputs (versions.toml row, frontend dependencies).
    assert lock.recorded_inputs(path) == lock.lock_inputs(release), \
        f"{path.name} is stale: run scripts/lock_gpu.py {release}"
    locked = lock.locked_versions(path)
    assert locked["vllm"] == ROWS[release]["vllm"]
    # Every input, caps included, holds for the locked version.
    for line in lock.lock_inputs(release):
        req = Requirement(line)
        name = req.name.lower().replace("_", "-")
        assert name in locked, name
        assert req.specifier.contains(locked[name], prereleases=True), (line, locked[name])
    assert (Version(locked["numpy"]) < Version("2")) or not ROWS[release]["numpy_below_2"]


def test_gpu_dockerfile_uses_the_lock(plan_for):
    plan = plan_for("--enable-gpu", "--endpoint=openai")
    assert plan.constraints.value == pins.gpu_lock_path(plan.upstream_container_version.value)
    d = render(plan).dockerfile
    venv = d[d.index("AS venv"):d.index("AS frontend-wheel")]
    assert "ENV PIP_CONSTRAINT=/opt/venv-constraints.txt" in venv
    assert venv.index("PIP_CONSTRAINT") < venv.index("pip install vllm==")


def test_another_vllm_gets_no_lock(plan_for):
    plan = plan_for("--enable-gpu", "--vllm-version=0.12.0")
    assert plan.constraints.value is None
    assert "PIP_CONSTRAINT" not in render(plan).dockerfile
    assert any("no lock for vLLM 0.12.0" in n for n in plan.notes)

"""versions.toml's [ngc] table: every row is complete and sourced, every pin fits its row,
the README's table of releases says what the rows say, and every row with a vLLM pairing
has a committed lock resolved from today's inputs."""
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tritonbuild import lock, pins
from tritonbuild.pipeline.render import render

ROWS = pins.ngc_releases()
PAIRED = [r for r, row in ROWS.items() if "vllm" in row]
KEYS = {"server_version", "ubuntu", "python", "cuda", "min_driver", "nvidia_vllm",
        "numpy_below_2"}
README = Path(__file__).resolve().parents[2] / "README.md"
# Where a fact may come from: NVIDIA's documents of a release, what follows from other
# facts (said how), or the project's own choice (said why).
SOURCE = re.compile(r"(release notes|support matrix) (\d{2}\.\d{2})\b.*|derived: .+|project: .+")


@pytest.mark.parametrize("release", ROWS)
def test_rows_are_complete(release):
    row = ROWS[release]
    assert re.fullmatch(r"\d{2}\.(0[1-9]|1[0-2])", release)
    assert KEYS <= set(row), KEYS - set(row)
    assert set(row) <= KEYS | {"vllm", "lock_caps", "sources", "unimportable_models"}, set(row) - KEYS
    assert re.fullmatch(r"3\.\d+", row["python"])
    assert re.fullmatch(r"2\.\d+\.\d+", row["server_version"])
    # A driver branch (R580 and later) or the exact minimum NVIDIA gives (615.61).
    assert re.fullmatch(r"\d{3}(\.\d+)?", row["min_driver"])
    assert isinstance(row["numpy_below_2"], bool)
    # The Python backend takes numpy 2 from 24.11 on.
    assert row["numpy_below_2"] == (release < "24.11")


@pytest.mark.parametrize("release", ROWS)
def test_every_fact_has_its_source(release):
    row = dict(ROWS[release])
    sources = row.pop("sources", {})
    assert set(sources) == set(row), f"[ngc.\"{release}\".sources]: {set(row) ^ set(sources)}"
    for fact, source in sources.items():
        m = SOURCE.fullmatch(source)
        assert m, f"{release} {fact}: {source!r} names no document, derivation or choice"
        # NVIDIA's documents of this release, except numpy's, which 24.11's notes settle
        # for every release.
        if m.group(2) and fact != "numpy_below_2":
            assert m.group(2) == release, (release, fact, source)


def test_the_26_08_driver_is_nvidias():
    # The support matrix gives an exact minimum for 26.08 (CUDA 13.4.1), above R580.
    assert ROWS["26.08"]["min_driver"] == "615.61"
    assert ROWS["26.08"]["cuda"] == "13.4.1"


def readme_releases() -> dict[str, list[str]]:
    """The README's table of NGC releases: release -> its cells, markup taken off."""
    text = README.read_text()
    head = "| NGC release | Triton | Ubuntu / Python | CUDA | host driver | vLLM |"
    assert head in text, f"README.md has no table starting {head!r}"
    rows = {}
    for line in text[text.index(head):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("**", "") for c in line.strip("|").split("|")]
        rows[cells[0].split()[0]] = cells[1:]
    return rows


def readme_driver(min_driver: str) -> str:
    return f"{min_driver}+" if "." in min_driver else f"R{min_driver}+"


def test_readme_table_is_the_table():
    readme = readme_releases()
    assert list(readme) == list(ROWS)
    for release, row in ROWS.items():
        triton, os_python, cuda, driver, vllm = readme[release]
        assert triton == row["server_version"], release
        assert os_python == f"{row['ubuntu']} / {row['python']}", release
        assert cuda == row["cuda"], release
        assert driver == readme_driver(row["min_driver"]), release
        assert vllm.split()[0] == row.get("vllm", "none"), release


def test_readme_driver_line_is_the_default_release():
    release = pins.get("triton.gpu_upstream_container_version")
    row = ROWS[release]
    assert f"| **{release}** (default) |" in README.read_text()
    driver = readme_driver(row["min_driver"]).rstrip("+")
    cuda = ".".join(row["cuda"].split(".")[:2])
    line = f"A host needs NVIDIA driver {driver} or later for the default image (CUDA {cuda})"
    assert line in " ".join(README.read_text().split()), line


@pytest.mark.parametrize("release", PAIRED)
def test_paired_vllm_runs_the_backend(release):
    row = ROWS[release]
    # The backend drives vLLM's v1 engine (AsyncLLM), which 0.11 is the first to carry alone.
    assert Version(row["vllm"]) >= Version("0.11.0")
    # vLLM's CUDA 13 builds (torch 2.9 on) need driver R580; the NGC image's CUDA needs it too.
    assert Version(row["min_driver"]) >= Version("580") and row["cuda"].startswith("13.")


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

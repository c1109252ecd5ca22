"""qa/common/build_py.py: the suites' and benchmarks' one way to run ./build.py (dry runs
here: they write the build folder and build nothing)."""

from __future__ import annotations

import json
import sys

from qa.common.build_py import BUILD_PY, build_failure, run_build_py


def test_a_dry_run_writes_the_build_folder_given(tmp_path):
    out = run_build_py("--backend=vllm", "--endpoint=openai", "--tag=qa-unit:dry", "--dryrun",
                       build_dir=tmp_path, timeout=120)
    assert out.returncode == 0, build_failure(out)
    assert out.args == [sys.executable, str(BUILD_PY), "--backend=vllm", "--endpoint=openai",
                        "--tag=qa-unit:dry", "--dryrun", f"--build-dir={tmp_path}"]
    assert json.loads((tmp_path / "plan.json").read_text())["tag"]["value"] == "qa-unit:dry"


def test_a_failed_run_names_the_command_its_status_and_its_output(tmp_path):
    out = run_build_py("--no-such-flag", build_dir=tmp_path, timeout=120)
    assert out.returncode != 0
    message = build_failure(out)
    assert message.startswith(f"{sys.executable} {BUILD_PY} --no-such-flag "
                              f"--build-dir={tmp_path} failed ({out.returncode}):\n")
    assert "unrecognized arguments: --no-such-flag" in message


def test_an_uncaptured_run_leaves_its_output_to_the_caller(tmp_path, capfd):
    out = run_build_py("--backend=vllm", "--dryrun", build_dir=tmp_path, timeout=120,
                       capture=False)
    assert out.returncode == 0 and out.stdout is None
    assert "Dockerfile" in capfd.readouterr().out
    assert build_failure(out).endswith(":\n")  # nothing kept to show

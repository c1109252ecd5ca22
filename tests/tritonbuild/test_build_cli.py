"""The orchestrator end to end with a fake engine: exit codes, messages, what is written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonbuild.cli import main
from tritonbuild.errors import BuildFailedError, EngineUnavailableError
from tritonbuild.pipeline.engine import BuildCommand, Engine


class FakeEngine(Engine):
    def __init__(self, available=True, exit_code=0, images=None):
        self.available, self.exit_code, self.ran = available, exit_code, []
        self.images = images

    def has_image(self, image):
        return self.images is None or image in self.images

    def check(self):
        if not self.available:
            raise EngineUnavailableError("no Docker engine answers at unix:///nowhere")

    def command(self, plan, dockerfile, context):
        return BuildCommand(["fake-build", f"--file={dockerfile}", str(context)], {})

    def run(self, command):
        self.ran.append(command)
        if self.exit_code:
            raise BuildFailedError(self.exit_code, " ".join(command.argv))


@pytest.mark.parametrize("argv", [
    ["--endpoint=rest"], ["--enable-cpu-metrics"], ["--upstream-container-version=2410"],
    ["--image=nope,x:y"], ["--backend=python", "--endpoint=openai"], ["--bogus"],
])
def test_validation_error_exits_2_one_line_nothing_written(argv, host, tmp_path, capsys):
    build_dir = tmp_path / "build"
    engine = FakeEngine()
    assert main(argv + [f"--build-dir={build_dir}"], host=host, engine=engine) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("build.py: error: ") and "\n" not in err
    assert not build_dir.exists() and engine.ran == []


def test_dryrun_writes_and_prints_paths(host, tmp_path, capsys):
    build_dir = tmp_path / "build"
    engine = FakeEngine(available=False)  # a dry run never talks to the engine
    assert main(["--backend=vllm", "--endpoint=openai", "--dryrun", f"--build-dir={build_dir}"],
                host=host, engine=engine) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(build_dir / n) for n in ("Dockerfile", "build.sh", "plan.json")]
    assert "FROM " in (build_dir / "Dockerfile").read_text()
    assert "fake-build" in (build_dir / "build.sh").read_text()
    plan = json.loads((build_dir / "plan.json").read_text())
    assert plan["endpoints"] == {"value": ["http", "grpc", "openai"], "source": "flag"}
    assert plan["flavor"]["source"] == "default"
    assert (build_dir / "context" / "backends" / "vllm").is_dir()
    assert engine.ran == []


def test_build_runs_engine(host, tmp_path):
    engine = FakeEngine()
    assert main([f"--build-dir={tmp_path}"], host=host, engine=engine) == 0
    assert len(engine.ran) == 1 and engine.ran[0].argv[0] == "fake-build"


def test_build_exit_code_is_passed_on(host, tmp_path, capsys):
    assert main([f"--build-dir={tmp_path}"], host=host, engine=FakeEngine(exit_code=17)) == 17
    assert "exit code 17" in capsys.readouterr().err


def test_no_engine_is_one_line_and_writes_nothing(host, tmp_path, capsys):
    build_dir = tmp_path / "build"
    assert main([f"--build-dir={build_dir}", "-q"], host=host,
                engine=FakeEngine(available=False)) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no Docker engine" in err
    assert not build_dir.exists()


def test_notes_are_logged_unless_quiet(host, tmp_path, capsys):
    main(["--dryrun", f"--build-dir={tmp_path}"], host=host, engine=FakeEngine())
    assert "implies --backend=python" in capsys.readouterr().err
    main(["--dryrun", "-q", f"--build-dir={tmp_path}"], host=host, engine=FakeEngine())
    assert capsys.readouterr().err == ""


BUILD_PY = Path(__file__).resolve().parents[2] / "build.py"


def run_build_py(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILD_PY), *argv], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)


def test_build_py_dry_run_from_another_folder(tmp_path):
    # The image that needs no torch wheel, so that this runs on any host with Jinja2.
    build_dir = tmp_path / "out"
    out = run_build_py("--backend=python", "--endpoint=http", "--dryrun", "-q",
                       f"--build-dir={build_dir}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(build_dir / n)
                                  for n in ("Dockerfile", "build.sh", "plan.json")]
    assert json.loads((build_dir / "plan.json").read_text())["backends"] == {
        "value": ["python"], "source": "flag"}


def test_build_py_reports_a_bad_flag_in_one_line(tmp_path):
    out = run_build_py("--endpoint=rest", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("build.py: error: --endpoint=rest: "
                          "allowed: http, grpc, openai, sagemaker, vertex-ai\n")
    assert not (tmp_path / "build").exists()


def test_build_py_without_jinja2(tmp_path):
    # A jinja2 that fails to import stands for a Python without it.
    (tmp_path / "jinja2.py").write_text("raise ImportError('no jinja2 here')\n")
    out = run_build_py("--dryrun", cwd=tmp_path, PYTHONPATH=str(tmp_path),
                       TVB_VENV=str(tmp_path / "no-venv"))
    assert out.returncode == 1
    assert out.stderr.startswith("build.py: error: Jinja2 is missing: pip install jinja2")
    # With a test environment at hand, build.py runs itself with that one's Python.
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text('#!/bin/sh\necho "venv python: $*"\n')
    (venv_bin / "python").chmod(0o755)
    out = run_build_py("--dryrun", cwd=tmp_path, PYTHONPATH=str(tmp_path),
                       TVB_VENV=str(tmp_path / "venv"))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"venv python: {BUILD_PY} --dryrun\n"


def test_missing_local_base_image_is_one_line(host, tmp_path, capsys):
    engine = FakeEngine(images=set())
    assert main([f"--build-dir={tmp_path / 'b'}", "-q"], host=host, engine=engine) == 1
    err = capsys.readouterr().err.strip()
    assert "no image local/" in err and "make_base_image.sh" in err and "\n" not in err
    assert not (tmp_path / "b").exists() and engine.ran == []

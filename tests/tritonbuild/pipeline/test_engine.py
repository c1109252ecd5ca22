"""DockerCli against a stand-in docker binary: real subprocesses, a script for the engine."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonbuild.errors import BuildFailedError, EngineUnavailableError
from tritonbuild.pipeline.engine import DockerCli


def fake_docker(tmp_path: Path, body: str) -> str:
    path = tmp_path / "docker"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_command_without_buildx(plan_for, cert):
    plan = plan_for("--tag=me/x:1", "--no-cache", "--pip-index-url=https://i/simple",
                    "--pip-extra-index-url=https://a/s", "--pip-extra-index-url=https://b/s")
    cmd = DockerCli(binary="/usr/bin/docker", buildx=False).command(plan, Path("/b/Dockerfile"),
                                                                   Path("/b/context"))
    assert cmd.env == {"DOCKER_BUILDKIT": "1"}
    assert cmd.argv == ["/usr/bin/docker", "build", "--progress=auto", "--file=/b/Dockerfile",
                        "--tag=me/x:1", f"--secret=id=pip_cert,src={cert}",
                        "--build-arg=PIP_INDEX_URL=https://i/simple",
                        "--build-arg=PIP_EXTRA_INDEX_URL=https://a/s https://b/s",
                        "--no-cache", "/b/context"]


def test_command_with_buildx_and_progress(plan_for):
    engine = DockerCli(binary="docker", buildx=True)
    cmd = engine.command(plan_for("-v"), Path("/D"), Path("/C"))
    assert cmd.argv[:5] == ["docker", "buildx", "build", "--load", "--progress=plain"]
    assert cmd.env == {}
    assert "--quiet" in engine.command(plan_for("-q"), Path("/D"), Path("/C")).argv


def test_buildx_detection(tmp_path):
    assert DockerCli(binary=fake_docker(tmp_path, "exit 0\n")).buildx is True
    assert DockerCli(binary=fake_docker(tmp_path, "exit 1\n")).buildx is False


def test_check_no_engine(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nowhere.sock")
    docker = fake_docker(tmp_path, "echo 'Cannot connect' >&2; exit 1\n")
    with pytest.raises(EngineUnavailableError, match="unix:///nowhere.sock"):
        DockerCli(binary=docker).check()
    with pytest.raises(EngineUnavailableError, match="no Docker client"):
        DockerCli(binary=str(tmp_path / "missing")).check()


def test_check_engine_answers(tmp_path):
    DockerCli(binary=fake_docker(tmp_path, "echo 20.10.24\n")).check()


def test_run_streams_and_passes_exit_code(plan_for, tmp_path, capfd):
    record = tmp_path / "args"
    docker = fake_docker(tmp_path, f'echo "$DOCKER_BUILDKIT $*" > {record}\necho progress\nexit 7\n')
    engine = DockerCli(binary=docker, buildx=False)
    cmd = engine.command(plan_for(), tmp_path / "Dockerfile", tmp_path)
    with pytest.raises(BuildFailedError) as e:
        engine.run(cmd)
    assert e.value.exit_code == 7
    assert record.read_text().startswith("1 build --progress=auto")
    assert "progress" in capfd.readouterr().out


def test_script_runs_the_same_command(plan_for, tmp_path):
    record = tmp_path / "args"
    docker = fake_docker(tmp_path, f'echo "$DOCKER_BUILDKIT $*" > {record}\n')
    engine = DockerCli(binary=docker, buildx=False)
    cmd = engine.command(plan_for("--tag=a/b:c"), tmp_path / "Dockerfile", tmp_path)
    script = tmp_path / "build.sh"
    script.write_text(cmd.script())
    script.chmod(0o755)
    assert os.system(str(script)) == 0
    assert record.read_text().split() == ["1"] + cmd.argv[1:]


def test_has_image(tmp_path):
    assert DockerCli(binary=fake_docker(tmp_path, '[ "$3" = "here:1" ]\n')).has_image("here:1")
    assert not DockerCli(binary=fake_docker(tmp_path, '[ "$3" = "here:1" ]\n')).has_image("x:1")

"""qa/common/docker.py without a Docker engine: what its failures show, and the check that
an engine answers (the docker command itself replaced by a fake)."""

from __future__ import annotations

import subprocess

import pytest

from qa.common import docker as docker_cli
from qa.common.docker import shown


def test_a_failure_message_leaves_environment_values_out():
    args = ["run", "-d", "-e", "API_KEY=s3cret", "--env", "TOKEN=t0ken", "--env=PASS=pw",
            "-e", "FROM_HOST", "image", "serve", "--x=1"]
    assert shown(args) == ("run -d -e API_KEY=... --env TOKEN=... --env=PASS=... -e FROM_HOST "
                           "image serve --x=1")


def test_a_failed_command_is_an_assertion_without_the_secret(monkeypatch):
    def fake_run(argv, **kw):
        return subprocess.CompletedProcess(argv, 125, "", "docker: bad flag\n")

    monkeypatch.setattr(docker_cli.subprocess, "run", fake_run)
    with pytest.raises(AssertionError) as failure:
        docker_cli.docker("run", "-e", "KEY=s3cret", "image")
    assert str(failure.value) == "docker run -e KEY=... image failed (125):\ndocker: bad flag"
    assert docker_cli.docker("ps", check=False).returncode == 125


def test_require_engine_fails_the_test_when_no_engine_answers(monkeypatch):
    calls = []

    def fake_docker(*args, **kw):
        calls.append(args)
        return subprocess.CompletedProcess(args, 1, "", "Cannot connect")

    monkeypatch.setattr(docker_cli, "docker", fake_docker)
    with pytest.raises(pytest.fail.Exception, match="no Docker engine answers"):
        docker_cli.require_engine()
    assert calls == [("version",)]
    monkeypatch.setattr(docker_cli, "docker",
                        lambda *args, **kw: subprocess.CompletedProcess(args, 0, "", ""))
    docker_cli.require_engine()  # passes

"""Debian's docker client for the suites: one way to run it and to report its failures."""

from __future__ import annotations

import subprocess

from tritonbuild.hostenv import docker_binary

DOCKER = docker_binary()


def docker(*args: str, check: bool = True, timeout: float = 120,
           **kw) -> subprocess.CompletedProcess:
    """`docker ARGS` with its output captured (text); with `check`, a failure is an
    AssertionError naming the command, its status and the tail of what it printed."""
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({out.returncode}):\n"
                             f"{(out.stdout + out.stderr).strip()[-4000:]}")
    return out

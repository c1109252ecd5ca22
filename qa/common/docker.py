"""Debian's docker client for the suites: one way to run it and to report its failures."""

from __future__ import annotations

import subprocess

from tritonbuild.hostenv import docker_binary

DOCKER = docker_binary()
# The `docker run` option of every container the suites start: the least CPU weight.
# The container still gets every cycle the tests leave, but it no longer starves them.
# With the default weight, a busy engine held the tests' client off both cores of a
# 2-core machine for seconds, and the client then measured its own wait as the
# server's: its cancels came after the request had ended (of 24 runs of the
# cancellation tests, 3 failed with the default weight, 5 with a quarter of it, none
# with this one), and a request sent after a kill read as "still served 2.8 s after".
LEAST_CPU_WEIGHT = "--cpu-shares=2"


def docker(*args: str, check: bool = True, timeout: float = 120,
           **kw) -> subprocess.CompletedProcess:
    """`docker ARGS` with its output captured (text); with `check`, a failure is an
    AssertionError naming the command, its status and the tail of what it printed."""
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({out.returncode}):\n"
                             f"{(out.stdout + out.stderr).strip()[-4000:]}")
    return out

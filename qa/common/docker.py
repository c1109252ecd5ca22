"""Debian's docker client for the suites and benchmarks: one way to run it, to read a
container's log and to report its failures."""

from __future__ import annotations

import subprocess

from tritonbuild.hostenv import docker_binary

DOCKER = docker_binary()
# The `docker run` option of every container the harness starts (ServedProcess.container,
# and the kubelet's pods): the least CPU weight.  The container still gets every cycle
# the tests (or a benchmark's client) leave, but it no longer starves them.
# With the default weight, a busy engine held the tests' client off both cores of a
# 2-core machine for seconds, and the client then measured its own wait as the
# server's: its cancels came after the request had ended (of 24 runs of the
# cancellation tests, 3 failed with the default weight, 5 with a quarter of it, none
# with this one), and a request sent after a kill read as "still served 2.8 s after".
LEAST_CPU_WEIGHT = "--cpu-shares=2"


def shown(args: tuple[str, ...] | list[str]) -> str:
    """`args` for a failure message, the value of each `-e NAME=VALUE` left out: a pod's
    environment carries its Secrets' values (API keys) resolved."""
    words, after_env_flag = [], False
    for arg in args:
        prefix = "--env=" if arg.startswith("--env=") else "" if after_env_flag else None
        if prefix is not None and "=" in arg[len(prefix):]:
            arg = prefix + arg[len(prefix):].split("=", 1)[0] + "=..."
        after_env_flag = arg in ("-e", "--env")
        words.append(arg)
    return " ".join(words)


def docker(*args: str, check: bool = True, timeout: float = 120,
           **kw) -> subprocess.CompletedProcess:
    """`docker ARGS` with its output captured (text); with `check`, a failure is an
    AssertionError naming the command (see shown()), its status and the tail of what it
    printed."""
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {shown(args)} failed ({out.returncode}):\n"
                             f"{(out.stdout + out.stderr).strip()[-4000:]}")
    return out


def container_log(container: str, *options: str, timeout: float = 120) -> str:
    """What the container printed (`docker logs OPTIONS`), stdout and stderr as one stream
    in the order written, so that an offset into an earlier read still marks the same
    place."""
    out = subprocess.run([DOCKER, "logs", *options, container], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace",
                         timeout=timeout)
    return out.stdout


def require_engine() -> None:
    """Fail the calling test, saying how to start one, when no Docker engine answers."""
    import pytest  # only where a test calls this: the benchmarks import this module too

    if docker("version", check=False, timeout=60).returncode != 0:
        pytest.fail("no Docker engine answers: eval \"$(scripts/setup_host.sh)\" starts one")

"""Start the `triton-openai` command as a real server process on a free port: in front of
a Triton elsewhere (FrontendProcess), or with Triton in its own process (InProcessFrontend)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from qa.common import ServedProcess, ServerError, free_port
from qa.common.docker import docker
from qa.common.tritonserver import MODEL_CONTROL_KEY, container_args, host_backends


def frontend_command() -> list[str]:
    """The installed console script of the environment running the tests."""
    script = Path(sys.executable).parent / "triton-openai"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "triton_openai"]


class _Frontend:
    """What both ways of running the frontend share: the wait for it, its log, and a
    stop on leaving a `with` block.  `_served` is the started frontend."""

    _served: ServedProcess

    def _wait_or_stop(self, path: str, timeout: float, interval: float) -> None:
        """Wait until the frontend answers `path`; one that does not is stopped, and the
        error raised."""
        try:
            self._served.wait_http("http", path, timeout=timeout, interval=interval)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 60.0) -> int | None:
        """Stop the frontend (each way of running it has its own); its exit status."""
        raise NotImplementedError

    @property
    def log(self) -> str:
        return self._served.log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class FrontendProcess(_Frontend):
    """`triton-openai` on this host, in front of the Triton at `triton_url`."""

    def __init__(self, triton_url: str, *args: str, metrics_url: str | None = None,
                 env: dict[str, str] | None = None, timeout: float = 120.0, wait_ready=True):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [*frontend_command(), "--triton-url", triton_url, "--host", "127.0.0.1",
               "--port", str(self.port), "--triton-metrics-url", metrics_url or "", *args]
        # The key of the model-repository API (the catalog reads its index) of the
        # suites' containers, which the image restricts; a Triton on this host ignores it.
        known = {"TRITON_MODEL_CONTROL_KEY": MODEL_CONTROL_KEY}
        self._served = ServedProcess.host("triton-openai", cmd, ports={"http": self.port},
                                          env={**os.environ, **known, **(env or {})})
        self.proc = self._served.proc
        self._wait_or_stop("/health/ready" if wait_ready else "/health/live", timeout, 0.2)

    def stop(self, timeout: float = 30.0) -> int | None:
        self._served.stop(timeout)
        return self.proc.returncode


class InProcessFrontend(_Frontend):
    """`triton-openai --model-repository`: the frontend with Triton in its own process.

    On this host: the checkout's frontend, with tritonserver's library and backends from
    $TVB_TRITON_HOME (the vLLM backend from this checkout).  With TVB_IMAGE set: a
    container of the image on the repository (mounted at /models), started as a user
    starts it: the entrypoint with TRITON_IN_PROCESS=1, and `args` in the frontend's
    flags file (FRONTEND_ARGS_FILE).
    """

    def __init__(self, model_repository: Path, *args: str, mounts=(), timeout: float = 420.0,
                 wait: bool = True):
        self._tmp = Path(tempfile.mkdtemp(prefix="triton-openai-"))
        image = os.environ.get("TVB_IMAGE")
        if image:
            flags = self._tmp / "frontend.args"
            flags.write_bytes(b"".join(a.encode() + b"\0" for a in ("--triton-log-info", *args)))
            docker_args = [*container_args(model_repository, mounts),
                           "-e", "TRITON_IN_PROCESS=1", "-v", f"{flags}:/tmp/frontend.args:ro",
                           "-e", "FRONTEND_ARGS_FILE=/tmp/frontend.args"]
            self._served = ServedProcess.container("triton-openai", image, ports={"http": 9000},
                                                   docker_args=docker_args)
        else:
            backends, env = host_backends(self._tmp)
            # The frontend's own imports (this checkout's, as the tests run it) too.
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (env["PYTHONPATH"], os.environ.get("PYTHONPATH")) if p)
            home = Path(os.environ["TVB_TRITON_HOME"])
            library = next((home / "lib").glob("libtritonserver*.so"))
            port = free_port()
            cmd = [*frontend_command(), f"--model-repository={model_repository}",
                   f"--backend-directory={backends}", f"--triton-library={library}",
                   "--host", "127.0.0.1", "--port", str(port), "--triton-log-info", *args]
            self._served = ServedProcess.host("triton-openai", cmd, ports={"http": port},
                                              env=env, cwd=self._tmp, own_group=True)
        self.url = self._served.url("http")
        if wait:
            self._wait_or_stop("/health/ready", timeout, 0.5)

    def exit_status(self) -> int | None:
        return self._served.exit_status()

    def kill(self, marker: str) -> None:
        """SIGKILL the processes of this frontend whose command line holds `marker` (as
        `docker top` shows a container's, or `ps` this host's process group)."""
        if self._served.cid is not None:
            table = docker("top", self._served.cid, "-eo", "pid,args", timeout=60).stdout
        else:
            table = subprocess.run(["ps", "-eo", "pid,pgid,args"], capture_output=True,
                                   text=True, timeout=60, check=True).stdout
        rows = [row.split(None, 2) for row in table.splitlines()[1:]]
        if self._served.cid is None:  # this host: the frontend's process group only
            group = str(os.getpgid(self._served.proc.pid))
            rows = [[pid, *args] for pid, pgid, *args in rows if pgid == group]
        pids = [int(row[0]) for row in rows if marker in " ".join(row[1:])]
        if not pids:
            raise ServerError(f"no process of the frontend's holds {marker!r}")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    def stop(self, timeout: float = 60.0) -> int | None:
        status = self._served.stop(timeout)
        shutil.rmtree(self._tmp, ignore_errors=True)
        return status

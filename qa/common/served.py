"""A server that a test or a benchmark starts: a process on this host or a container of an
image, on free loopback ports, with its log kept, waited for until it answers, and stopped
(SIGTERM, then SIGKILL; a container is removed) when it is no longer needed.

    with ServedProcess.host("registry", [binary, "serve", cfg], ports={"http": port}) as reg:
        reg.wait_http("http", "/v2/", status=401, timeout=30)

    with ServedProcess.container("tritonserver", image, ports={"http": 8000}) as box:
        box.wait_http("http", "/v2/health/ready", timeout=240)
        httpx.get(box.url("http") + "/v2/models/m")

`wait_until()` is the one way to wait for anything a server does: on a timeout or an early
exit its error says what it waited for, for how long, and, for a server that died, its exit
status and the end of its log.  Every container gets the least CPU weight
(qa.common.docker.LEAST_CPU_WEIGHT).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from qa.common.docker import LEAST_CPU_WEIGHT, container_log, docker
from qa.common.http_calls import http_status

LOOPBACK = "127.0.0.1"


class ServerError(RuntimeError):
    """A server did not start or become ready; the message carries its log tail."""


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range.

    bind(0) hands out ports from the ephemeral range, which outgoing connections (the
    tests' own clients) take their local ports from too: one of them could hold the port
    by the time the server binds it, and the server would fail to start its service.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randint(max(1024, low - 12000), low - 1)
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise ServerError(f"no free port found below {low}")


def wait_until(check: Callable[[], bool], *, timeout: float, describe: str,
               process: ServedProcess | None = None, interval: float = 0.25,
               log: Callable[[], str] | None = None) -> float:
    """Call `check` until it is true and return the seconds that took.

    describe: what is waited for, for the error ("http://...:8000/v2/health/ready to answer
        200").
    process: the server whose exit ends the wait early; its exit status and log tail go
        into the error.
    log: the end of the log the error shows instead of `process`'s own, for a server whose
        output goes elsewhere (one that `docker exec` started inside the container).
    A ServerError after `timeout` seconds, or as soon as `process` has exited."""
    start = time.monotonic()

    def tail() -> str:
        text = log() if log is not None else process.log_tail() if process is not None else ""
        return f":\n{text}" if text or process is not None else ""

    while True:
        if check():
            return time.monotonic() - start
        waited = time.monotonic() - start
        if process is not None and (code := process.exit_status()) is not None:
            raise ServerError(f"{process.name} exited with status {code} after {waited:.1f} s,"
                              f" waiting for {describe}{tail()}")
        if waited >= timeout:
            who = f"{process.name}: " if process is not None else ""
            raise ServerError(f"{who}gave up after {timeout:.0f} s waiting for {describe}"
                              f"{tail()}")
        time.sleep(interval)


def wait_for_status(url: str, *, timeout: float, status: int = 200, interval: float = 0.25,
                    process: ServedProcess | None = None,
                    log: Callable[[], str] | None = None) -> float:
    """Wait until a GET of `url` answers `status`; the seconds that took (see wait_until()
    for `process` and `log`).  Without `process`, nothing but the URL is asked: a poll
    every few milliseconds then costs no `docker inspect` each time."""
    return wait_until(lambda: http_status(url) == status, timeout=timeout, process=process,
                      describe=f"{url} to answer {status}", interval=interval, log=log)


class ServedProcess:
    """A started server; build it with `host()` or `container()`.

    name: what the errors call it.
    ports: port name -> its loopback port on this host (`url(name)` makes the address).
    proc: the host process (None for a container); cid: the container's id (None for a
        host process).
    started: time.monotonic() just before the start.
    """

    def __init__(self, name: str, ports: Mapping[str, int], *, started: float,
                 proc: subprocess.Popen | None = None, cid: str | None = None,
                 log_path: Path | None = None, own_group: bool = False,
                 tmp: Path | None = None):
        self.name = name
        self.ports = dict(ports)
        self.started = started
        self.proc = proc
        self.cid = cid
        self._log_path = log_path
        self._own_group = own_group
        self._tmp = tmp              # a folder of ours, removed by stop()
        self._kept_log: str | None = None  # the log of a container, read before removal

    # --- constructors ------------------------------------------------------
    @classmethod
    def host(cls, name: str, argv: Sequence[str], *, ports: Mapping[str, int] = (),
             env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
             log_path: Path | None = None, own_group: bool = False) -> ServedProcess:
        """Start `argv` on this host, its stdout and stderr into one log.

        ports: the ports `argv` serves on (pick them with free_port()).
        env: its whole environment (default: this process's).
        log_path: where the log goes (default: a file of ours, removed by stop(); the log
            stays readable afterwards).
        own_group: a process group of its own, so that stop() signals the server's
            children too (tritonserver's stubs, engine processes)."""
        tmp = None
        if log_path is None:
            tmp = Path(tempfile.mkdtemp(prefix=f"{name}-"))
            log_path = tmp / "server.log"
        started = time.monotonic()
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            # A process group of its own, but not a session of its own: Linux schedules
            # each session as one group (autogroup), and on a 2-core machine a busy
            # engine's session starved the tests' session (client, frontend) of CPU for
            # seconds at a time.
            proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                    env=None if env is None else dict(env), cwd=cwd,
                                    process_group=0 if own_group else None)
        return cls(name, dict(ports), started=started, proc=proc, log_path=log_path,
                   own_group=own_group, tmp=tmp)

    @classmethod
    def container(cls, name: str, image: str, *, ports: Mapping[str, int] = (),
                  docker_args: Sequence[str] = (), command: Sequence[str] = (),
                  shm_size: str = "1g") -> ServedProcess:
        """`docker run -d` a container of `image`, at the least CPU weight (see
        qa.common.docker.LEAST_CPU_WEIGHT).

        ports: port name -> container port; each is published on a free loopback port.
        docker_args: more `docker run` options, after the harness's own: a later
            `--cpu-shares` or `--shm-size` replaces its value.
        command: what follows the image.
        shm_size: vLLM's engine processes pass tensors through /dev/shm, which Docker
            makes 64 MB by default."""
        host_ports = {key: free_port() for key in ports}
        args = ["run", "-d", f"--shm-size={shm_size}", LEAST_CPU_WEIGHT]
        for key, container_port in dict(ports).items():
            args += ["-p", f"{LOOPBACK}:{host_ports[key]}:{container_port}"]
        # No --rm: a container that dies at start-up keeps its log until stop() removes it.
        args += [*docker_args, image, *command]
        started = time.monotonic()
        out = docker(*args, check=False, timeout=300)
        if out.returncode != 0:
            raise ServerError(f"docker run {image} failed ({out.returncode}): "
                              f"{out.stderr.strip()}")
        return cls(name, host_ports, started=started, cid=out.stdout.strip())

    # --- addresses ---------------------------------------------------------
    def url(self, port: str) -> str:
        return f"http://{LOOPBACK}:{self.ports[port]}"

    # --- state -------------------------------------------------------------
    def exit_status(self) -> int | None:
        """None while the server runs; then its exit status (-1: its container is gone)."""
        if self.proc is not None:
            return self.proc.poll()
        if self.cid is None:
            return -1
        out = docker("inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", self.cid,
                     check=False, timeout=60)
        if out.returncode != 0:
            return -1
        running, code = out.stdout.split()
        return None if running == "true" else int(code)

    def running(self) -> bool:
        return self.exit_status() is None

    def wait_exit(self, timeout: float) -> int | None:
        """Wait up to `timeout` seconds for the server to exit by itself: its exit status,
        or None while it still runs."""
        try:
            if self.proc is not None:
                return self.proc.wait(timeout)
            if self.cid is None:
                return -1
            return int(docker("wait", self.cid, timeout=timeout).stdout.strip())
        except subprocess.TimeoutExpired:
            return None

    def wait_http(self, port: str, path: str, *, timeout: float, status: int = 200,
                  interval: float = 0.25, log: Callable[[], str] | None = None) -> float:
        """Wait until `path` on `port` answers `status`; the seconds since the start.
        An exit of the server ends the wait early (see wait_until(), also for `log`)."""
        wait_for_status(self.url(port) + path, timeout=timeout, status=status,
                        interval=interval, process=self, log=log)
        return time.monotonic() - self.started

    @property
    def log(self) -> str:
        """Everything the server printed so far, stdout and stderr in the order written."""
        if self._kept_log is not None:
            return self._kept_log
        if self.cid is not None:
            return container_log(self.cid)
        try:
            return self._log_path.read_text(errors="replace")
        except (FileNotFoundError, AttributeError):
            return ""

    def log_tail(self, lines: int = 60) -> str:
        """The last `lines` lines of the log.  A running container's come from the engine
        alone: a server out of file descriptors can log without end, too much to read."""
        if self._kept_log is None and self.cid is not None:
            return container_log(self.cid, "--tail", str(lines)).rstrip("\n")
        return "\n".join(self.log.splitlines()[-lines:])

    # --- stop --------------------------------------------------------------
    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM to the process, up to `timeout` seconds for the exit, then SIGKILL (of
        the whole process group, for a host process in a group of its own); a container is
        removed, its log kept.  The exit status, or None when the server had to be killed.
        Stopping a stopped server again does nothing more and returns None."""
        code = None
        if self.proc is not None:
            code = self._stop_host(timeout)
            self._keep_log()
            self.proc = None
        if self.cid is not None:
            docker("stop", "-t", str(int(timeout)), self.cid, check=False, timeout=timeout + 60)
            code = self.exit_status()
            self._keep_log()
            docker("rm", "-f", self.cid, check=False)
            self.cid = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        return code

    def _stop_host(self, timeout: float) -> int | None:
        proc, code = self.proc, None
        if proc.poll() is None:
            # The server alone, as `docker stop` and the kubelet signal a container's
            # first process: it stops its models, and their engines, itself.  A SIGTERM
            # to the whole group also reached vLLM's engine cores, which then died under
            # their models, one of which at times never unloaded, holding the server
            # to its 30 s exit timeout.
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        else:
            code = proc.returncode
        # Whatever is left of its group (a stuck stub or engine process) goes too.
        self._signal(signal.SIGKILL)
        proc.wait()
        return code

    def _signal(self, sig: int) -> None:
        try:
            if self._own_group:
                os.killpg(self.proc.pid, sig)
            elif self.proc.poll() is None:
                self.proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _keep_log(self) -> None:
        self._kept_log = self.log

    def __enter__(self) -> ServedProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

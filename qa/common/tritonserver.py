"""Start a real tritonserver for a test, on this host or in a container.

Host mode (default) runs `$TVB_TRITON_HOME/bin/tritonserver` with the Python backend from
`$TVB_TRITON_HOME/backends/python` and this checkout's vLLM backend, inside the Python
environment `$TVB_VENV` (see scripts/setup_host.sh for these variables).

Container mode (`TVB_IMAGE=image:tag`) runs the same model repository in a container of
that image with its default command, so one suite checks both the checkout and the image.

    with TritonServer(repo, mounts=[tiny_model]) as server:
        httpx.post(f"{server.http_url}/v2/models/m/generate", json=...)
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from qa.common.models import gpu_count
from tritonbuild.hostenv import docker_binary

REPO_ROOT = Path(__file__).resolve().parents[2]
VLLM_BACKEND = REPO_ROOT / "backends" / "vllm"

# Environment every vLLM engine under test gets: no downloads, a small KV cache (the
# test machines are small and shared).
ENGINE_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


class ServerError(RuntimeError):
    """The server did not start or become ready; the message carries its log tail."""


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
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ServerError(f"no free port found below {low}")


def _require_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ServerError(f"{name} is not set: run `eval \"$(scripts/setup_host.sh)\"` first")
    return value


def _site_packages(venv: str) -> str:
    lib = Path(venv) / "lib"
    found = sorted(lib.glob("python3*/site-packages"))
    if not found:
        raise ServerError(f"no site-packages under {lib}")
    return str(found[0])


class TritonServer:
    """A running tritonserver; a context manager that stops it on exit.

    model_repository: folder to serve (mounted read-only at /models in container mode).
    mounts: host paths the models refer to (e.g. the tiny model); in container mode each
        is mounted read-only at the same absolute path.
    server_args: extra tritonserver flags (e.g. `--model-control-mode=explicit`).  In
        container mode they replace the image's default command with a plain tritonserver
        (no OpenAI frontend then).
    env: extra environment for the server and its models.
    wait_ready: wait for /v2/health/ready (all models loaded); otherwise only for /live.
    """

    def __init__(self, model_repository: Path | str, *, mounts=(), server_args=(),
                 env: dict[str, str] | None = None, wait_ready: bool = True,
                 timeout: float = 420.0, image: str | None = None):
        self.model_repository = Path(model_repository).resolve()
        self.mounts = [Path(m).resolve() for m in mounts]
        self.server_args = list(server_args)
        self.env = dict(env or {})
        self.timeout = timeout
        self.image = image if image is not None else os.environ.get("TVB_IMAGE") or None
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.openai_port = free_port() if self.image else None
        self._proc: subprocess.Popen | None = None
        self._container: str | None = None
        self._tmp = Path(tempfile.mkdtemp(prefix="tritonserver-"))
        self._log_path = self._tmp / "server.log"
        self._start()
        try:
            self._wait("/v2/health/ready" if wait_ready else "/v2/health/live")
        except BaseException:
            self.stop()
            raise

    # --- addresses ---------------------------------------------------------
    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """host:port, as tritonclient.grpc wants it."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def openai_url(self) -> str | None:
        """The image's OpenAI frontend (container mode with the default command only)."""
        if self.openai_port is None or self.server_args:
            return None
        return f"http://127.0.0.1:{self.openai_port}"

    # --- life cycle --------------------------------------------------------
    def _start(self) -> None:
        if self.image:
            self._start_container()
        else:
            self._start_host()

    def _start_host(self) -> None:
        triton_home = Path(_require_env("TVB_TRITON_HOME"))
        venv = _require_env("TVB_VENV")
        libdir = _require_env("TVB_PYTHON_LIBDIR")
        # A backend directory of our own: Triton's Python backend beside this checkout's
        # vLLM backend, which Triton runs through the Python backend (it has a model.py).
        backends = self._tmp / "backends"
        backends.mkdir()
        (backends / "python").symlink_to(triton_home / "backends" / "python")
        (backends / "vllm").symlink_to(VLLM_BACKEND)
        env = dict(os.environ)
        env.update(ENGINE_ENV)
        env.update({
            # The stub embeds libpython: the interpreter's own lib first, so that the
            # stub loads the same build as the venv's packages were made for.
            "LD_LIBRARY_PATH": os.pathsep.join(
                p for p in (libdir, str(triton_home / "lib"), os.environ.get("LD_LIBRARY_PATH"))
                if p),
            # The embedded interpreter does not know about the venv otherwise.
            "PYTHONPATH": _site_packages(venv),
            "PATH": f"{venv}/bin{os.pathsep}{os.environ.get('PATH', '')}",
        })
        env.update(self.env)
        cmd = [
            str(triton_home / "bin" / "tritonserver"),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backends}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            *self.server_args,
        ]
        self._log = open(self._log_path, "wb")
        # A process group of its own, so that stop() can signal all of it (stubs, engine
        # processes), but not a session of its own: Linux schedules each session as one
        # group (autogroup), and on a 2-core machine the busy engine's session then
        # starved the tests' session (client, frontend) of CPU for seconds at a time.
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                      env=env, cwd=self._tmp, process_group=0)

    def _start_container(self) -> None:
        docker = docker_binary()
        # As the test's own user: the repository and the model live in folders only it
        # may read (pytest's tmp dirs, ~/.cache are 0700), which the image's own user
        # cannot; the image's default user is checked by L0_build_image.  No --rm: a
        # container that dies at start-up keeps its log until stop() removes it.
        # The least CPU weight: the container still gets every cycle the tests leave, but
        # it no longer starves them.  With the default weight, a busy engine held the
        # tests' client off both cores of a 2-core machine for seconds, and its cancels
        # came after the request had ended (of 24 runs of the cancellation tests, 3
        # failed with the default weight, 5 with a quarter of it, none with this one).
        cmd = [docker, "run", "-d", "--shm-size=1g", "--cpu-shares=2",
               "--user", f"{os.getuid()}:{os.getgid()}",
               "-p", f"127.0.0.1:{self.http_port}:8000",
               "-p", f"127.0.0.1:{self.grpc_port}:8001",
               "-p", f"127.0.0.1:{self.metrics_port}:8002",
               "-p", f"127.0.0.1:{self.openai_port}:9000",
               "-v", f"{self.model_repository}:/models:ro",
               "-e", "MODEL_REPOSITORY=/models"]
        for mount in self.mounts:
            cmd += ["-v", f"{mount}:{mount}:ro"]
        if gpu_count():
            cmd.append("--gpus=all")  # the GPU image on a GPU machine
        for key, value in {**ENGINE_ENV, **self.env}.items():
            cmd += ["-e", f"{key}={value}"]
        cmd.append(self.image)
        # The suites read the backend's log lines (which request it stopped, and when),
        # so the server logs at info level whatever the image was built with.
        if self.server_args:
            cmd += ["tritonserver", "--model-repository=/models", "--log-info=true",
                    *self.server_args]
        else:
            cmd.append("--log-info=true")  # the entrypoint adds it to its server flags
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise ServerError(f"docker run failed: {out.stderr.strip()}")
        self._container = out.stdout.strip()

    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        if self._container:
            docker = docker_binary()
            out = subprocess.run([docker, "inspect", "-f", "{{.State.Running}}",
                                  self._container], capture_output=True, text=True)
            return out.stdout.strip() == "true"
        return False

    def _wait(self, path: str, base: str | None = None, timeout: float | None = None) -> None:
        """Poll `base + path` (Triton's HTTP port by default) until it answers 200."""
        url, timeout = (base or self.http_url) + path, timeout or self.timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise ServerError(f"tritonserver exited during start-up:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.5)
        raise ServerError(f"not ready ({url}) after {timeout:.0f} s:\n{self.log_tail()}")

    def wait_openai(self, path: str = "/v1/models", timeout: float = 240.0) -> None:
        """Wait until the image's own OpenAI frontend answers `path`."""
        if self.openai_url is None:
            raise ServerError("no OpenAI frontend here: it runs in container mode with the "
                              "image's default command only")
        self._wait(path, self.openai_url, timeout)

    @property
    def logs(self) -> str:
        """Everything the server (and its models) printed so far."""
        if self._container:
            # One stream, in the order the server wrote it, so that an offset into an
            # earlier read still marks the same place.
            out = subprocess.run([docker_binary(), "logs", self._container],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, errors="replace")
            return out.stdout
        try:
            return self._log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.logs.splitlines()[-lines:])

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM to tritonserver alone, as a container runtime or a service manager
        sends it, and wait for it to exit; its stub and engine processes are left to it.
        (stop() signals the whole process group, which also stops the engine directly.)"""
        if self._proc is None:
            raise ServerError("terminate() stops a tritonserver on this host, not a container")
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                return self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        return self._proc.returncode

    def stop(self, timeout: float = 60.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL of its whole process group)."""
        code = None
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                code = self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                code = None
        if self._proc is not None:
            # Whatever is left of the group (a stuck stub or engine process) goes too.
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if code is None:
                self._proc.wait()
            self._log.close()
            self._proc = None
        if self._container:
            docker = docker_binary()
            subprocess.run([docker, "stop", "-t", str(int(timeout)), self._container],
                           capture_output=True)
            # Keep the log: the container goes now.
            self._container_log = self.logs
            self._log_path.write_text(self._container_log)
            subprocess.run([docker, "rm", "-f", self._container], capture_output=True)
            self._container = None
        return code

    def __enter__(self) -> TritonServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self._tmp, ignore_errors=True)


if __name__ == "__main__":
    # Manual use: PYTHONPATH=backends/vllm python -m qa.common.tritonserver MODEL_REPOSITORY
    with TritonServer(sys.argv[1], wait_ready=False) as server:
        print(server.http_url, server.grpc_url, server.metrics_url, flush=True)
        try:
            server._proc.wait() if server._proc else time.sleep(1e9)
        except KeyboardInterrupt:
            pass

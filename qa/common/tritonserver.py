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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qa.common.models import gpu_count
from qa.common.served import ServedProcess, ServerError, free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
VLLM_BACKEND = REPO_ROOT / "backends" / "vllm"

# Environment every vLLM engine under test gets: no downloads, a small KV cache (the
# test machines are small and shared).
ENGINE_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}

# The image's ports, as its entrypoint serves them.
IMAGE_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002, "openai": 9000}

# The key of the model-repository API in every container the suites start: the image's
# entrypoint restricts that API to requests that carry it (a random one unless set).
MODEL_CONTROL_KEY = "qa-model-control-key"
MODEL_CONTROL_HEADERS = {"triton-model-control-key": MODEL_CONTROL_KEY}


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


def host_backends(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A backend directory in `tmp` (Triton's Python backend beside this checkout's vLLM
    backend, which Triton runs through the Python backend: it has a model.py), and the
    environment a Triton on this host serves it with."""
    triton_home = Path(_require_env("TVB_TRITON_HOME"))
    venv = _require_env("TVB_VENV")
    libdir = _require_env("TVB_PYTHON_LIBDIR")
    backends = tmp / "backends"
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
    return backends, env


def container_args(model_repository: Path, mounts=(), env=None) -> list[str]:
    """`docker run` options for a container of the image that serves `model_repository`
    (mounted at /models, with each of `mounts` at its own path)."""
    # As the test's own user: the repository and the model live in folders only it
    # may read (pytest's tmp dirs, ~/.cache are 0700), which the image's own user
    # cannot; the image's default user is checked by L0_build_image.
    args = ["--user", f"{os.getuid()}:{os.getgid()}",
            "-v", f"{model_repository}:/models:ro", "-e", "MODEL_REPOSITORY=/models"]
    for mount in mounts:
        args += ["-v", f"{mount}:{mount}:ro"]
    if gpu_count():
        args.append("--gpus=all")  # the GPU image on a GPU machine
    known = {**ENGINE_ENV, "TRITON_MODEL_CONTROL_KEY": MODEL_CONTROL_KEY}
    for key, value in {**known, **(env or {})}.items():
        args += ["-e", f"{key}={value}"]
    return args


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
    wait: False returns at once, for servers started together (call `wait()` on each).
    """

    def __init__(self, model_repository: Path | str, *, mounts=(), server_args=(),
                 env: dict[str, str] | None = None, wait_ready: bool = True,
                 timeout: float = 420.0, image: str | None = None, wait: bool = True):
        self.model_repository = Path(model_repository).resolve()
        self.mounts = [Path(m).resolve() for m in mounts]
        self.server_args = list(server_args)
        self.env = dict(env or {})
        self.timeout = timeout
        self.image = image if image is not None else os.environ.get("TVB_IMAGE") or None
        self._tmp = Path(tempfile.mkdtemp(prefix="tritonserver-"))
        self.process = self._start_container() if self.image else self._start_host()
        ports = self.process.ports
        self.http_port, self.grpc_port, self.metrics_port = (
            ports["http"], ports["grpc"], ports["metrics"])
        self.openai_port = ports.get("openai")
        self._wait_path = "/v2/health/ready" if wait_ready else "/v2/health/live"
        if wait:
            self.wait()

    def wait(self) -> None:
        """Wait until the server answers as __init__'s wait_ready says; a server that does
        not come up is stopped, and the error raised."""
        try:
            self.process.wait_http("http", self._wait_path, timeout=self.timeout, interval=0.5)
        except BaseException:
            self.__exit__()
            raise

    # --- addresses ---------------------------------------------------------
    @property
    def http_url(self) -> str:
        return self.process.url("http")

    @property
    def grpc_url(self) -> str:
        """host:port, as tritonclient.grpc wants it."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return self.process.url("metrics") + "/metrics"

    @property
    def openai_url(self) -> str | None:
        """The image's OpenAI frontend (container mode with the default command only)."""
        if self.openai_port is None or self.server_args:
            return None
        return self.process.url("openai")

    @property
    def _proc(self) -> subprocess.Popen | None:
        """The host process (host mode)."""
        return self.process.proc

    @property
    def _container(self) -> str | None:
        """The container's id (container mode)."""
        return self.process.cid

    # --- life cycle --------------------------------------------------------
    def _start_host(self) -> ServedProcess:
        triton_home = Path(_require_env("TVB_TRITON_HOME"))
        backends, env = host_backends(self._tmp)
        env.update(self.env)
        ports = {"http": free_port(), "grpc": free_port(), "metrics": free_port()}
        cmd = [
            str(triton_home / "bin" / "tritonserver"),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backends}",
            f"--http-port={ports['http']}",
            f"--grpc-port={ports['grpc']}",
            f"--metrics-port={ports['metrics']}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            *self.server_args,
        ]
        # A process group of its own, so that stop() signals all of it (stubs, engine
        # processes).
        return ServedProcess.host("tritonserver", cmd, ports=ports, env=env, cwd=self._tmp,
                                  log_path=self._tmp / "server.log", own_group=True)

    def _start_container(self) -> ServedProcess:
        args = container_args(self.model_repository, self.mounts, self.env)
        # The suites read the backend's log lines (which request it stopped, and when),
        # so the server logs at info level whatever the image was built with.
        if self.server_args:
            command = ["tritonserver", "--model-repository=/models", "--log-info=true",
                       *self.server_args]
        else:
            command = ["--log-info=true"]  # the entrypoint adds it to its server flags
        return ServedProcess.container("tritonserver", self.image, ports=IMAGE_PORTS,
                                       docker_args=args, command=command)

    def running(self) -> bool:
        return self.process.running()

    def wait_openai(self, path: str = "/v1/models", timeout: float = 240.0) -> None:
        """Wait until the image's own OpenAI frontend answers `path`."""
        if self.openai_url is None:
            raise ServerError("no OpenAI frontend here: it runs in container mode with the "
                              "image's default command only")
        self.process.wait_http("openai", path, timeout=timeout, interval=0.5)

    @property
    def logs(self) -> str:
        """Everything the server (and its models) printed so far; in container mode one
        stream, in the order the server wrote it, so that an offset into an earlier read
        still marks the same place."""
        return self.process.log

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM to tritonserver alone, as a container runtime or a service manager
        sends it, and wait for it to exit; its stub and engine processes are left to it.
        (stop() signals the whole process group, which also stops the engine directly.)"""
        proc = self.process.proc
        if proc is None:
            raise ServerError("terminate() stops a tritonserver on this host, not a container")
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        return proc.returncode

    def stop(self, timeout: float = 60.0) -> int | None:
        """Stop the server (SIGTERM to tritonserver, then SIGKILL of its whole process
        group; a container is stopped and removed, its log kept)."""
        return self.process.stop(timeout)

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

"""The servers of `bench_openai.py --image`: containers of one image, started one at a time.

  ours   the image's own entrypoint: tritonserver with the vLLM backend and the OpenAI
         frontend, serving the sample model of the image's model repository
  vllm   vLLM's own OpenAI server (`python -m vllm.entrypoints.openai.api_server`), run in
         a container of the same image on the same model, with the engine settings of the
         image's model.json turned into its command-line flags

Each start is timed from `docker run` to the moment every port the benchmark uses
answers ready: what a user waits for before the first request.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass

from qa.common import free_port
from tritonbuild.hostenv import docker_binary

# Where the image keeps its sample model repository and the model the benchmark serves.
MODEL_REPOSITORY = "/opt/tritonserver/model_repository"
MODEL = "vllm_model"
TRITON_HTTP_PORT, OPENAI_PORT = 8000, 9000

# model.json keys that are the backend's or the Triton model's, not engine flags.
_NOT_FLAGS = {"model"}


def vllm_server_flags(model_json: dict) -> list[str]:
    """vLLM server flags with the engine settings of a backend model.json.

    Each key becomes `--key-with-dashes VALUE` and a true boolean a bare flag.  A false
    boolean is left out: vLLM's store-true flags (`--disable-log-stats`) have no `--no-`
    form and are off by default.  Dicts and lists go as JSON, as vLLM parses them."""
    flags = ["--model", str(model_json["model"])]
    for key, value in model_json.items():
        if key in _NOT_FLAGS or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def image_model_json(image: str, model: str = MODEL) -> dict:
    """The model.json that the image's sample repository serves `model` with."""
    out = subprocess.run([docker_binary(), "run", "--rm", "--entrypoint", "cat", image,
                          f"{MODEL_REPOSITORY}/{model}/1/model.json"],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"cannot read {model}'s model.json from {image}: {out.stderr.strip()}")
    return json.loads(out.stdout)


@dataclass
class Container:
    """A started container: its id, its published ports and how long it took to be ready."""
    id: str
    urls: dict[str, str]  # "triton", "openai": http://127.0.0.1:PORT
    ready_s: float = 0.0

    def logs_tail(self, chars: int = 3000) -> str:
        out = subprocess.run([docker_binary(), "logs", self.id], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")
        return out.stdout[-chars:]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _running(container_id: str) -> bool:
    out = subprocess.run([docker_binary(), "inspect", "-f", "{{.State.Running}}", container_id],
                         capture_output=True, text=True)
    return out.stdout.strip() == "true"


@contextmanager
def run_container(image: str, kind: str, model_json: dict, *, docker_args=(),
                  timeout: float = 600):
    """Start the `kind` ("ours" or "vllm") container of `image`, wait until it is ready,
    yield it, and remove it afterwards."""
    ports = {"triton": free_port(), "openai": free_port()}
    cmd = [docker_binary(), "run", "-d", "--shm-size=1g", *docker_args,
           "-p", f"127.0.0.1:{ports['openai']}:{OPENAI_PORT}"]
    if kind == "ours":
        cmd += ["-p", f"127.0.0.1:{ports['triton']}:{TRITON_HTTP_PORT}", image]
        checks = {"triton": "/v2/health/ready", "openai": "/health/ready"}
    elif kind == "vllm":
        cmd += [image, "python", "-m", "vllm.entrypoints.openai.api_server",
                *vllm_server_flags(model_json), "--served-model-name", MODEL,
                "--host", "0.0.0.0", "--port", str(OPENAI_PORT), "--uvicorn-log-level", "warning"]
        checks = {"openai": "/health"}
    else:
        raise ValueError(f"unknown container kind {kind!r}")
    urls = {name: f"http://127.0.0.1:{ports[name]}" for name in checks}
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"docker run failed: {out.stderr.strip()}")
    container = Container(out.stdout.strip(), urls)
    try:
        pending = dict(checks)
        while pending:
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"{kind} not ready after {timeout:.0f} s:\n"
                                   f"{container.logs_tail()}")
            if not _running(container.id):
                raise RuntimeError(f"{kind} container exited:\n{container.logs_tail()}")
            for name, path in list(pending.items()):
                if _ready(urls[name] + path):
                    del pending[name]
            if pending:
                time.sleep(0.25)
        container.ready_s = time.perf_counter() - start
        yield container
    finally:
        subprocess.run([docker_binary(), "rm", "-f", container.id], capture_output=True)

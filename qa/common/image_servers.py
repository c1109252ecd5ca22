"""Our server and vLLM's, each a container of one image, as bench_openai.py --image and
qa/L0_prometheus compare them.

  ours   the image's own entrypoint: tritonserver with the vLLM backend and the OpenAI
         frontend, serving the sample model of the image's model repository
  inprocess  the image's entrypoint with TRITON_IN_PROCESS=1: the OpenAI frontend alone,
         with Triton in its own process, on the same repository
  vllm   vLLM's own OpenAI server (`python -m vllm.entrypoints.openai.api_server`), run in
         a container of the same image on the same model, with the engine settings of the
         image's model.json turned into its command-line flags

Each start is timed from `docker run` to the moment every port the benchmark uses
answers ready: what a user waits for before the first request.
"""

from __future__ import annotations

import argparse
import json
import shlex
from contextlib import contextmanager
from dataclasses import dataclass

from qa.common import ServedProcess
from qa.common.docker import docker

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
    out = docker("run", "--rm", "--entrypoint", "cat", image,
                 f"{MODEL_REPOSITORY}/{model}/1/model.json", check=False)
    if out.returncode != 0:
        raise RuntimeError(f"cannot read {model}'s model.json from {image}: {out.stderr.strip()}")
    return json.loads(out.stdout)


@dataclass
class Container:
    """A started container: its id, its published ports and how long it took to be ready."""
    id: str
    urls: dict[str, str]  # "triton", "openai": http://127.0.0.1:PORT
    ready_s: float


def start_container(image: str, kind: str, model_json: dict, *, docker_args=(),
                    vllm_args=()) -> tuple[ServedProcess, dict[str, str]]:
    """Start the `kind` ("ours", "inprocess" or "vllm") container of `image`, without
    waiting for it: (the container, {port name: the path that answers once it is ready}).
    "inprocess" is the OpenAI frontend with Triton in its own process, on the image's
    model repository (no tritonserver).  `vllm_args`: more flags of vLLM's server (the
    "vllm" kind only)."""
    if vllm_args and kind != "vllm":
        raise ValueError(f"vllm_args are flags of vLLM's server, not of the {kind} container")
    if kind == "ours":
        ports = {"triton": TRITON_HTTP_PORT, "openai": OPENAI_PORT}
        command = []
        checks = {"triton": "/v2/health/ready", "openai": "/health/ready"}
    elif kind == "inprocess":
        ports = {"openai": OPENAI_PORT}
        command = []  # the entrypoint's: triton-openai --model-repository, as a user runs it
        docker_args = [*docker_args, "-e", "TRITON_IN_PROCESS=1"]
        checks = {"openai": "/health/ready"}
    elif kind == "vllm":
        ports = {"openai": OPENAI_PORT}
        command = ["python", "-m", "vllm.entrypoints.openai.api_server",
                   *vllm_server_flags(model_json), "--served-model-name", MODEL,
                   "--host", "0.0.0.0", "--port", str(OPENAI_PORT),
                   "--uvicorn-log-level", "warning", *vllm_args]
        checks = {"openai": "/health"}
    else:
        raise ValueError(f"unknown container kind {kind!r}")
    box = ServedProcess.container(f"the {kind} container", image, ports=ports,
                                  docker_args=docker_args, command=command)
    return box, checks


def add_vllm_arg_option(parser: argparse.ArgumentParser) -> None:
    """A benchmark's repeatable `--vllm-arg` option, which vllm_flags() reads."""
    parser.add_argument("--vllm-arg", action="append", default=[], metavar="ARG",
                        help="more flags of vLLM's server, split as a shell would "
                             "(repeatable; write --vllm-arg=\"--stream-interval 13\")")


def vllm_flags(args: list[str]) -> list[str]:
    """Flags of vLLM's server given as a benchmark's repeatable `--vllm-arg` (each split as a
    shell would: `--vllm-arg="--stream-interval 13"`)."""
    return [flag for arg in args for flag in shlex.split(arg)]


def wait_ready(box: ServedProcess, checks: dict[str, str], timeout: float) -> float:
    """Seconds from the container's start until every check answered."""
    ready_s = 0.0
    for name, path in checks.items():
        ready_s = box.wait_http(name, path, timeout=max(timeout - ready_s, 1))
    return ready_s


@contextmanager
def run_container(image: str, kind: str, model_json: dict, *, docker_args=(),
                  vllm_args=(), timeout: float = 600):
    """Start the `kind` ("ours" or "vllm") container of `image`, wait until it is ready,
    yield it, and remove it afterwards."""
    box, checks = start_container(image, kind, model_json, docker_args=docker_args,
                                  vllm_args=vllm_args)
    try:
        ready_s = wait_ready(box, checks, timeout)
        yield Container(box.cid, {name: box.url(name) for name in checks}, ready_s)
    finally:
        box.stop(timeout=0)  # measured already: no need to wait for a graceful exit

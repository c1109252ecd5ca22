"""Keys stay secret: no process of a pod shows one on its command line (which `ps`, `docker
top` and a node's monitoring agents read), no file that holds one is readable by anyone
but its owner, and none is baked into an image layer.

The chart's pods get their keys from Secrets; `serve --api-key KEY` gets it on its own
command line, which the entrypoint must not pass on, nor keep in PID 1's."""

from __future__ import annotations

import os

import httpx
import pytest

from qa.common import ServedProcess
from qa.common.build_py import run_build_py
from qa.common.docker import docker

pytestmark = pytest.mark.docker

READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "240"))
SERVE_KEY = "serve-key-that-must-not-leak-3141592653"


def command_lines(cid: str) -> str:
    """Every process's command line in a container, one a line."""
    out = docker("exec", cid, "sh", "-c",
                 "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done")
    return out.stdout


def files_holding(cid: str, secret: str) -> dict[str, str]:
    """The files under the container's writable folders that hold `secret`, with their
    modes (the secret goes in on stdin: not on a command line of its own)."""
    out = docker("exec", "-i", cid, "sh", "-c",
                 "grep -rlF -f - /tmp /dev/shm /etc/triton-vllm /home 2>/dev/null "
                 "| while read -r f; do echo \"$(stat -c %a \"$f\") $f\"; done",
                 input=secret + "\n")
    return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.stdout.splitlines()}


def assert_private(files: dict[str, str]) -> None:
    for path, mode in files.items():
        assert mode[-2:] == "00", f"{path} holds a key and has mode {mode}"


@pytest.mark.parametrize("pod", ["server", "frontend"])
def test_no_pod_shows_a_key_on_a_command_line(target, pod):
    box = getattr(target.release, pod)
    lines = command_lines(box.cid)
    assert lines.strip(), "no process listed"
    for name, key in (("the API key", target.api_key),
                      ("the model-control key", target.model_control_key)):
        assert key not in lines, f"{name} is on a command line of the {pod} pod:\n" + \
            "\n".join(line for line in lines.splitlines() if key in line).replace(key, "KEY")


@pytest.mark.parametrize("pod", ["server", "frontend"])
def test_files_holding_a_key_are_private(target, pod):
    box = getattr(target.release, pod)
    for key in (target.api_key, target.model_control_key):
        assert_private(files_holding(box.cid, key))


def test_serve_api_key_reaches_the_frontend_and_no_command_line(target):
    image = target.server.container["image"]
    box = ServedProcess.container(
        "serve --api-key", image, ports={"openai": 9000},
        command=("serve", "/opt/models/tiny-llama", "--max-model-len", "512",
                 "--api-key", SERVE_KEY))
    with box:
        box.wait_http("openai", "/health/ready", timeout=READY_TIMEOUT)
        models = box.url("openai") + "/v1/models"
        assert httpx.get(models, timeout=30).status_code == 401
        answer = httpx.get(models, headers={"Authorization": f"Bearer {SERVE_KEY}"},
                           timeout=30)
        assert answer.status_code == 200, answer.text
        lines = command_lines(box.cid)
        assert SERVE_KEY not in lines, "the key is on a command line:\n" + "\n".join(
            line for line in lines.splitlines() if SERVE_KEY in line)
        files = files_holding(box.cid, SERVE_KEY)
        assert_private(files)


def test_no_image_layer_holds_an_api_key(target):
    image = target.server.container["image"]
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    assert "--api-key" not in history and "API_KEY=" not in history


def test_build_py_refuses_a_key_in_the_served_models_flags(tiny_model, tmp_path):
    out = run_build_py("--backend=vllm", "--endpoint=openai", "--dryrun",
                       f"--serve-model={tiny_model}",
                       f"--serve-model-args=--max-model-len 512 --api-key {SERVE_KEY}",
                       build_dir=tmp_path, timeout=120)
    assert out.returncode != 0, out.stdout + out.stderr
    assert "--api-key" in out.stderr and "TRITON_OPENAI_API_KEY" in out.stderr, out.stderr
    assert SERVE_KEY not in out.stderr  # the refusal names the flag, not its value
    assert SERVE_KEY not in "".join(p.read_text(errors="replace")
                                    for p in tmp_path.rglob("*") if p.is_file())

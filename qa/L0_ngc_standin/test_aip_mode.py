"""The GPU image's way in, on a stand-in for NGC's base (scripts/make_ngc_standin.sh: the
release's Ubuntu and Python, NGC's /opt/nvidia entrypoint and its Vertex AI hook, a real
tritonserver): with AIP_MODE=PREDICTION, as Vertex AI starts a container, the arguments
must still reach the image's entrypoint, not tritonserver.

The image under test takes from the GPU Dockerfile that `./build.py --enable-gpu --dryrun`
renders exactly the lines that make the entry chain (the hooks, the entrypoint, the vLLM
backend's package, whose model watch the entrypoint starts beside tritonserver, the user,
ENTRYPOINT), on the stand-in instead of NGC's base; the CUDA vLLM environment stays out
(several GB, and it plays no part in how the container starts).

    TVB_NGC_STANDIN_IMAGE   stand-in image to make or reuse (default local/ngc-standin:<release>-py3)
    TVB_IMAGE_TAG           prefix of the test images' tags (default tritonserver-vllm)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qa.common.build_py import build_failure, run_build_py
from qa.common.docker import docker
from tritonbuild import pins

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker
RELEASE = pins.get("triton.gpu_upstream_container_version")
# What the GPU Dockerfile's runtime stage does to enter (and as whom).
ENTRY_LINES = ("COPY ngc/entrypoint.d/ ", "COPY image/ ", "COPY backends/vllm/ ", "USER ",
               "ENTRYPOINT ")


@pytest.fixture(scope="module")
def standin() -> str:
    if docker("version", check=False, timeout=60).returncode != 0:
        pytest.fail("no Docker engine answers: eval \"$(scripts/setup_host.sh)\" starts one")
    env = {**os.environ, "TVB_PYTHON": sys.executable}
    out = subprocess.run([str(REPO / "scripts" / "make_ngc_standin.sh"), RELEASE], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip().splitlines()[-1]


def _tag(name: str) -> str:
    prefix = os.environ.get("TVB_IMAGE_TAG", "tritonserver-vllm").split(":")[0]
    return f"{prefix}:ngc-standin-{name}"


def _entry_image(standin: str, tmp: Path, with_our_hook: bool) -> str:
    build_dir = tmp / ("ours" if with_our_hook else "ngc-only")
    out = run_build_py("--backend=vllm", "--enable-gpu",
                       f"--upstream-container-version={RELEASE}", "--dryrun",
                       build_dir=build_dir, timeout=120)
    assert out.returncode == 0, build_failure(out)
    rendered = (build_dir / "Dockerfile").read_text().splitlines()
    runtime = rendered[next(i for i, line in enumerate(rendered) if " AS runtime" in line):]
    lines = [line for line in runtime if line.startswith(ENTRY_LINES)]
    assert [next(p for p in ENTRY_LINES if line.startswith(p)) for line in lines] == \
        list(ENTRY_LINES), lines
    if not with_our_hook:
        for hook in (build_dir / "context" / "ngc" / "entrypoint.d").glob("*.sh"):
            hook.unlink()
    (build_dir / "context" / "Dockerfile").write_text(
        "\n".join([f"FROM {standin}", *lines]) + "\n")
    tag = _tag("ours" if with_our_hook else "ngc-only")
    docker("build", "-q", "-t", tag, str(build_dir / "context"), timeout=300,
           env={**os.environ, "DOCKER_BUILDKIT": "1"})
    return tag


@pytest.fixture(scope="module")
def images(standin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("entry")
    made = {ours: _entry_image(standin, tmp, ours) for ours in (True, False)}
    yield made
    docker("image", "rm", "-f", *made.values(), check=False)


def _run(image: str, *argv: str, **env: str) -> subprocess.CompletedProcess:
    flags = [f"--env={k}={v}" for k, v in env.items()]
    return docker("run", "--rm", *flags, image, *argv, check=False, timeout=120)


def test_the_standin_runs_ngcs_hook():
    # The stand-in's hook is the one its entrypoint sources (not an empty folder).
    hooks = sorted(p.name for p in (REPO / "scripts" / "ngc_standin" / "entrypoint.d").iterdir())
    assert hooks == ["99-check-run-aip-mode.sh"]


@pytest.mark.parametrize("env", [{}, {"AIP_MODE": "PREDICTION"}])
def test_our_entrypoint_runs_the_command(images, env):
    # The entrypoint runs a command it is given; tritonserver would refuse these arguments.
    out = _run(images[True], "sh", "-c", 'echo "entrypoint ran $0 as $(id -u)"', "sh", **env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "entrypoint ran sh as 1000"


def test_aip_mode_starts_our_entrypoints_tritonserver(images):
    # No command: the entrypoint starts tritonserver with the image's own flags, and
    # this stand-in has no model repository, so tritonserver names the image's one.
    out = _run(images[True], AIP_MODE="PREDICTION")
    assert out.returncode != 0
    assert "/opt/tritonserver/model_repository" in out.stdout + out.stderr, \
        out.stdout + out.stderr


def test_without_our_hook_tritonserver_takes_the_entrypoint_as_an_argument(images):
    # What NGC's hook alone does: the arguments never reach our entrypoint.
    out = _run(images[False], AIP_MODE="PREDICTION")
    assert out.returncode != 0
    assert "Unexpected argument: /opt/triton-vllm/entrypoint.sh" in out.stdout + out.stderr
    out = _run(images[False], "sh", "-c", "echo entrypoint ran", "sh", AIP_MODE="PREDICTION")
    assert out.returncode != 0 and "entrypoint ran" not in out.stdout
    assert "Usage: tritonserver" in out.stdout + out.stderr

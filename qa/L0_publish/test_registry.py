"""Publishing to a real registry on loopback (Debian's docker-registry, htpasswd auth),
with the same code build.py --push runs: push, promote by digest, pull back by digest,
run it; the remote manifest and labels read with skopeo without pulling; a wrong password
fails with a clear error and pushes nothing.

The image pushed is a small one built here FROM the local base image with the labels the
real image carries (its layers are the base's 117 MB): the publishing code does not care
what the image holds, and CI stays fast.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from functools import partial
from pathlib import Path

import pytest

from qa.common.build_py import CPU_IMAGE_FLAGS, run_build_py
from qa.common.docker import docker as run_docker
from qa.common.passes import QA_GATE_SUITE
from qa.common.registry import LocalRegistry
from tritonbuild import pins
from tritonbuild.release.publish import (
    CredentialsError,
    DockerSkopeo,
    parse_target,
    publish,
    sbom_tag,
)
from tritonbuild.release.sbom import dumps, image_sbom
from tritonbuild.release.tags import compute_tags

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
LABELS = {"org.opencontainers.image.title": "publish test",
          "io.triton-vllm.version.tritonserver": pins.get("triton.server_version")}


# Pushes and pulls of a whole image get ten minutes.
docker = partial(run_docker, timeout=600)


@pytest.fixture(scope="module")
def registry():
    with LocalRegistry() as reg:
        yield reg


@pytest.fixture
def small_image():
    tag = f"tvb-publish-test:{uuid.uuid4().hex[:12]}"
    dockerfile = (f"FROM {pins.get('base.cpu_image')}\n"
                  + "".join(f"LABEL {k}={json.dumps(v)}\n" for k, v in LABELS.items())
                  + f'CMD ["echo", "published {tag}"]\n')
    docker("build", "-q", "-t", tag, "-", input=dockerfile)
    yield tag
    docker("image", "rm", "-f", tag, check=False)


def skopeo_inspect(reg: LocalRegistry, ref: str, config_dir, *extra: str) -> dict:
    out = subprocess.run(["skopeo", "inspect", "--tls-verify=false",
                          f"--authfile={config_dir}/config.json", *extra, f"docker://{ref}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_round_trip(registry, small_image, tmp_path, monkeypatch):
    config = tmp_path / "docker-config"
    config.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    # The credentials come from `docker login`, as a user's would.
    login = docker("login", "-u", registry.user, "--password-stdin", registry.address,
                   input=registry.password)
    assert "Login Succeeded" in login.stdout
    target = parse_target(f"{registry.address}/triton/vllm-test")
    tags = compute_tags(release="24.10", flavor="cpu", kind="release",
                        git_sha="0123456789abcdef", arch="x86_64")
    build_dir = tmp_path / "build"
    bom = image_sbom(small_image)
    done = publish(small_image, target, tags, DockerSkopeo(), build_dir, sbom=dumps(bom))
    assert json.loads((build_dir / "published.json").read_text())["digest"] == done.digest
    # The SBOM lists the base image's Debian packages, from dpkg's own records.
    debs = {c["name"] for c in bom["components"] if c["purl"].startswith("pkg:deb/")}
    assert {"base-files", "dpkg", "libc6"} <= debs

    # Every tag names the pushed digest, read from the registry without pulling.
    remote_tags = registry.get_json("/v2/triton/vllm-test/tags/list")["tags"]
    assert sorted(remote_tags) == sorted([*tags.all, sbom_tag(done.digest)])
    for tag in tags.all:
        info = skopeo_inspect(registry, target.ref(tag), config)
        assert info["Digest"] == done.digest, tag
        assert {k: info["Labels"].get(k) for k in LABELS} == LABELS
    raw = skopeo_inspect(registry, target.at(done.digest), config, "--raw")
    assert raw["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
    # The SBOM beside it names the image it describes.
    sbom_info = skopeo_inspect(registry, target.ref(sbom_tag(done.digest)), config)
    assert sbom_info["Labels"]["io.triton-vllm.sbom-of"] == target.at(done.digest)
    assert sbom_info["Digest"] == done.sbom_digest

    # Gone from the engine, pulled back by digest, run: the same image.
    docker("image", "rm", small_image)
    ref = target.at(done.digest)
    docker("pull", ref)
    try:
        repo_digests = json.loads(docker("image", "inspect", "-f", "{{json .RepoDigests}}",
                                         ref).stdout)
        assert ref in repo_digests
        assert docker("run", "--rm", ref).stdout.strip() == f"published {small_image}"
    finally:
        docker("image", "rm", "-f", ref, check=False)


def test_wrong_password_is_a_clear_error_and_pushes_nothing(registry, small_image, tmp_path,
                                                            monkeypatch):
    config = registry.docker_config(tmp_path / "stale", password="an-old-password")
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    target = parse_target(f"{registry.address}/triton/never-pushed")
    tags = compute_tags(release="24.10", flavor="cpu", kind="nightly",
                        git_sha="0123456789abcdef", arch="x86_64", date="20261201")
    with pytest.raises(CredentialsError) as e:
        publish(small_image, target, tags, DockerSkopeo(), tmp_path / "build")
    message = str(e.value)
    assert message.startswith(f"{registry.address} refused the credentials for it in the "
                              f"Docker config ({config}/config.json)")
    assert message.endswith(f"(log in with `docker login {registry.address}`)")
    assert "an-old-password" not in message
    assert "triton/never-pushed" not in registry.get_json("/v2/_catalog")["repositories"]
    assert not (tmp_path / "build" / "published.json").exists()


def test_build_py_qa_then_push_publishes_the_real_image(registry, tmp_path):
    """`./build.py ... --qa=L0_image --push` on the image this run built (qa/L0_build_image,
    same flags: the build is all cache hits): the real QA gate (`python -m qa`, the image
    checks suite in a container of the image) and then the push.  About 6 minutes on the
    2-core machine: 4 for the suite, the rest the upload.

    scripts/run_tests.sh runs the image checks suite only here (qa/common/passes.py), so
    every one of its tests must have run and passed, and a failure names them."""
    image = os.environ.get("TVB_IMAGE_TAG", "")
    if not image or docker("image", "inspect", image, check=False).returncode != 0:
        pytest.skip("no image built in this run (qa/L0_build_image builds TVB_IMAGE_TAG)")
    image_id = docker("image", "inspect", "-f", "{{.Id}}", image).stdout.strip()
    config = registry.docker_config(tmp_path / "docker-config")
    build_dir = tmp_path / "build"
    out = run_build_py(*CPU_IMAGE_FLAGS, f"--tag={image}", "-q", f"--qa={QA_GATE_SUITE}",
                       f"--push={registry.address}/triton/vllm", build_dir=build_dir,
                       env={**os.environ, "DOCKER_CONFIG": str(config)})
    summary_file = build_dir / "qa" / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    failures = [name for suite in summary.get("suites", []) for name in suite["failures"]]
    assert out.returncode == 0, (f"failed in {QA_GATE_SUITE}: {failures}\n"
                                 + (out.stdout + out.stderr)[-6000:])
    assert docker("image", "inspect", "-f", "{{.Id}}", image).stdout.strip() == image_id
    # QA ran first, for real, and left its JUnit file, figures and summary in the build dir.
    assert summary["ok"] is True and summary["image"]["id"] == image_id, summary
    [suite] = summary["suites"]
    assert suite["name"] == QA_GATE_SUITE and suite["failed"] == suite["errors"] == 0, suite
    # Every test of the suite ran and passed (this run's image is the CPU flavor, whose
    # checks all apply).
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         f"qa/{QA_GATE_SUITE}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    tests = [line for line in collected.stdout.splitlines() if "::" in line]
    assert tests and suite["passed"] == len(tests), (suite, tests)
    assert suite["figures"]["image_size_bytes"]["value"] > 0, suite["figures"]
    assert (build_dir / "qa" / "junit" / f"{QA_GATE_SUITE}.xml").stat().st_size > 0
    assert "QA of" in (build_dir / "qa" / "summary.html").read_text()
    assert out.stderr.index("QA passed") < out.stderr.index("published "), out.stderr
    published = json.loads((build_dir / "published.json").read_text())
    release = json.loads((build_dir / "release.json").read_text())
    assert published["tags"] == [release["tags"]["value"]["arch"],
                                 release["tags"]["value"]["immutable"]]
    target = parse_target(published["repository"])
    for tag in published["tags"]:
        info = skopeo_inspect(registry, target.ref(tag), config)
        assert info["Digest"] == published["digest"]
        assert info["Labels"][f"io.triton-vllm.version.{pins.get('vllm.cpu_package')}"] == \
            pins.get("vllm.cpu_version")
    purls = {c["purl"] for c in json.loads((build_dir / "sbom.cdx.json").read_text())["components"]}
    assert f"pkg:pypi/{pins.get('vllm.cpu_package')}@{pins.get('vllm.cpu_version')}" in purls
    assert any(p.startswith("pkg:deb/debian/libnuma1@") for p in purls)
    assert published["sbom"]["tag"] in registry.get_json("/v2/triton/vllm/tags/list")["tags"]

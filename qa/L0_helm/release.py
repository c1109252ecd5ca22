"""The chart's pods in Docker, for the conformance suites: render, start, probe through
start-up as the kubelet would, run the `helm test` Pods, clean up."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from qa.common import chart
from qa.common.docker import docker
from qa.common.kubelet import PodContainer, Probe

HERE = Path(__file__).parent


def image_under_test() -> str:
    image = os.environ.get("TVB_IMAGE") or os.environ.get("TVB_IMAGE_TAG")
    if not image:
        pytest.fail("no image to check the chart against: set TVB_IMAGE (or TVB_IMAGE_TAG) "
                    "to an image build.py made, e.g. TVB_IMAGE=tritonserver-vllm:test")
    if docker("image", "inspect", image, check=False).returncode != 0:
        pytest.fail(f"image {image} does not exist: build it first "
                    f"(./build.py --backend=vllm --endpoint=openai --enable-metrics --tag={image})")
    return image


class Release:
    """The chart's pods running in Docker."""

    def __init__(self, image: str, workdir: Path, values_file: Path = HERE / "values.yaml"):
        repository, _, tag = image.rpartition(":")
        self.manifests = chart.render([values_file],
                                      {"image": {"repository": repository, "tag": tag}})
        self.workdir = workdir
        self.network = f"tvb-helm-{uuid.uuid4().hex[:8]}"
        self.pods: list[PodContainer] = []
        server = chart.find(self.manifests, "Deployment", f"{chart.RELEASE}-triton-vllm")
        suffix = self.network.rsplit("-", 1)[1]
        self.server = self._pod(server["spec"]["template"], "triton", f"triton-{suffix}")
        self.frontend = None
        frontends = [m for m in self.manifests if m["kind"] == "Deployment"
                     and m["metadata"]["name"].endswith("-frontend")]
        if frontends:
            self.frontend = self._pod(frontends[0]["spec"]["template"], "frontend",
                                      f"frontend-{suffix}")
        self.startup_seconds: float | None = None

    def _pod(self, template, container, name) -> PodContainer:
        pod = PodContainer(self.manifests, template, container, network=self.network,
                           workdir=self.workdir, name=name)
        self.pods.append(pod)
        return pod

    def probe(self, pod: PodContainer, kind: str) -> Probe:
        return Probe(pod, pod.container[kind])

    def start(self) -> None:
        docker("network", "create", self.network)
        self.started = time.monotonic()
        for pod in self.pods:
            pod.start()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.logs()}" for p in self.pods if p.cid)

    def stop(self) -> None:
        for pod in self.pods:
            pod.remove()
        docker("network", "rm", self.network, check=False)
        # The pods' emptyDirs hold files of the image's user: removed as root, by a container.
        folders = [p for p in self.workdir.iterdir() if p.is_dir()]
        if folders:
            mounts = [a for i, p in enumerate(folders) for a in ("-v", f"{p}:/w{i}")]
            docker("run", "--rm", "--user", "0", *mounts, "--entrypoint", "sh",
                   self.server.container["image"], "-c", "rm -rf /w*/* /w*/.[!.]*", check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_up(rel: Release) -> None:
    """The kubelet's start-up: the startup probe until it passes, or the pod is restarted
    once its budget (period x failureThreshold) is spent.  Checked every second rather
    than every period, to measure the start-up; the verdict is the budget's.  The frontend
    pod has no startup probe, so its liveness runs from the start and must never reach
    its failure threshold."""
    startup = rel.probe(rel.server, "startupProbe")
    frontend_live = rel.probe(rel.frontend or rel.server, "livenessProbe")
    live_failures, worst = 0, 0
    while True:
        elapsed = time.monotonic() - rel.started
        if not rel.server.running():
            pytest.fail(f"the Triton pod exited during start-up:\n{rel.logs()}")
        ok, why = startup.check()
        if ok:
            rel.startup_seconds = elapsed
            break
        if elapsed > startup.budget:
            pytest.fail(f"startup probe still failing after its budget of {startup.budget} s "
                        f"({why}): the kubelet would restart the pod\n{rel.logs()}")
        if rel.frontend:
            ok, _ = frontend_live.check()
            live_failures = 0 if ok else live_failures + 1
            worst = max(worst, live_failures)
        time.sleep(1)
    print(f"Triton pod ready {rel.startup_seconds:.1f} s after start "
          f"(startup budget {startup.budget} s)")
    assert worst < frontend_live.failure_threshold, \
        "the frontend pod's liveness failed while Triton loaded: it would be restarted"


def started_release(tmp_path_factory, values_file: Path = HERE / "values.yaml"
                    ) -> Iterator[Release]:
    """A suite's release of the image under test, through its start-up; stopped after."""
    rel = Release(image_under_test(), tmp_path_factory.mktemp("pods"), values_file)
    rel.start()
    try:
        start_up(rel)
        yield rel
    finally:
        rel.stop()


def until(probe: Probe, seconds: float) -> tuple[bool, str]:
    """Checks at the probe's period (at most 1 s apart here) until one passes."""
    deadline = time.monotonic() + seconds
    while True:
        ok, why = probe.check()
        if ok or time.monotonic() > deadline:
            return ok, why
        time.sleep(min(1.0, probe.period))


def run_helm_tests(release: Release) -> None:
    """Each `helm test` Pod, run to completion against the Services; all must succeed."""
    hooks = chart.hooks(release.manifests)
    assert len(hooks) == 3
    for hook in hooks:
        pod = release._pod(hook, hook["spec"]["containers"][0]["name"],
                           f"{hook['metadata']['name']}-{release.network[-8:]}")
        status, log = pod.run_to_completion(timeout=180)
        assert status == 0, f"{hook['metadata']['name']} failed ({status}):\n{log}"
        assert "ok" in log, log

"""Chart-to-image conformance: the pods the chart renders, run from the real image.

The chart is rendered by Helm's engine with the image under test, the frontend-only
Deployment and a generated API key (values.yaml beside this file).  The Triton pod and a
frontend pod then run with Docker exactly as rendered (command, args, env with the Secret
resolved, ports, user, read-only root filesystem, dropped capabilities, emptyDir volumes,
/dev/shm size, memory limit), on a network where each rendered Service is an alias of the
pods it selects.  Every rendered probe runs as the kubelet runs it (httpGet, exec,
tcpSocket, with its timeout, period and failure threshold); the startup probe must pass
within its budget, then readiness and liveness must pass, liveness must hold while the
engine is busy, and the `helm test` Pods must succeed against the Services.

    TVB_IMAGE or TVB_IMAGE_TAG   the image to run (scripts/run_tests.sh builds
                                 tritonserver-vllm:test in qa/L0_build_image first)
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from qa.common import chart
from qa.common.kubelet import PodContainer, Probe, docker

pytestmark = pytest.mark.docker
HERE = Path(__file__).parent


def _image() -> str:
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

    def __init__(self, image: str, workdir: Path):
        repository, _, tag = image.rpartition(":")
        self.manifests = chart.render([HERE / "values.yaml"],
                                      {"image": {"repository": repository, "tag": tag}})
        self.workdir = workdir
        self.network = f"tvb-helm-{uuid.uuid4().hex[:8]}"
        self.pods: list[PodContainer] = []
        server = chart.find(self.manifests, "Deployment", f"{chart.RELEASE}-triton-vllm")
        frontend = chart.find(self.manifests, "Deployment", f"{chart.RELEASE}-triton-vllm-frontend")
        suffix = self.network.rsplit("-", 1)[1]
        self.server = self._pod(server["spec"]["template"], "triton", f"triton-{suffix}")
        self.frontend = self._pod(frontend["spec"]["template"], "frontend", f"frontend-{suffix}")
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


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    rel = Release(_image(), tmp_path_factory.mktemp("pods"))
    rel.start()
    try:
        _start_up(rel)
        yield rel
    finally:
        rel.stop()


def _start_up(rel: Release) -> None:
    """The kubelet's start-up: the startup probe until it passes, or the pod is restarted
    once its budget (period x failureThreshold) is spent.  Checked every second rather
    than every period, to measure the start-up; the verdict is the budget's.  The frontend
    pod has no startup probe, so its liveness runs from the start and must never reach
    its failure threshold."""
    startup = rel.probe(rel.server, "startupProbe")
    frontend_live = rel.probe(rel.frontend, "livenessProbe")
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
        ok, _ = frontend_live.check()
        live_failures = 0 if ok else live_failures + 1
        worst = max(worst, live_failures)
        time.sleep(1)
    print(f"Triton pod ready {rel.startup_seconds:.1f} s after start "
          f"(startup budget {startup.budget} s)")
    assert worst < frontend_live.failure_threshold, \
        "the frontend pod's liveness failed while Triton loaded: it would be restarted"


def _until(probe: Probe, seconds: float) -> tuple[bool, str]:
    """Checks at the probe's period (at most 1 s apart here) until one passes."""
    deadline = time.monotonic() + seconds
    while True:
        ok, why = probe.check()
        if ok or time.monotonic() > deadline:
            return ok, why
        time.sleep(min(1.0, probe.period))


def test_startup_probe_passes_within_its_budget(release):
    budget = release.probe(release.server, "startupProbe").budget
    assert release.startup_seconds is not None and release.startup_seconds < budget


@pytest.mark.parametrize("kind", ["readinessProbe", "livenessProbe"])
def test_triton_pod_probes_pass_once_the_model_is_up(release, kind):
    probe = release.probe(release.server, kind)
    ok, why, took = probe.timed_check()
    assert ok, f"{kind}: {why}\n{release.logs()}"
    assert took < probe.timeout


@pytest.mark.parametrize("kind", ["readinessProbe", "livenessProbe"])
def test_frontend_pod_probes_pass(release, kind):
    probe = release.probe(release.frontend, kind)
    # Ready once its catalog sees Triton's model (it polls Triton; one period allowed).
    ok, why = _until(probe, probe.budget)
    assert ok, f"{kind}: {why}\n{release.logs()}"


def test_readiness_probe_fails_for_a_model_that_is_not_there(release):
    """The exec probe really checks the URLs it is given (no probe that cannot fail)."""
    spec = json.loads(json.dumps(release.server.container["readinessProbe"]))
    spec["exec"]["command"][-1] = "http://127.0.0.1:8000/v2/models/no_such_model/ready"
    ok, _ = Probe(release.server, spec).check()
    assert not ok


def test_helm_test_pods_pass_against_the_services(release):
    hooks = chart.hooks(release.manifests)
    assert len(hooks) == 3
    for hook in hooks:
        pod = release._pod(hook, hook["spec"]["containers"][0]["name"],
                           f"{hook['metadata']['name']}-{release.network[-8:]}")
        status, log = pod.run_to_completion(timeout=180)
        assert status == 0, f"{hook['metadata']['name']} failed ({status}):\n{log}"
        assert "ok" in log, log


def test_openai_service_requires_the_generated_key(release):
    url = f"http://127.0.0.1:{release.frontend.port_of('openai')}/v1/models"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=10)
    assert err.value.code == 401


def test_liveness_holds_while_the_engine_is_busy(release):
    """Liveness must not restart a pod that is only busy: run it, with its own timeout,
    while 16 long generations keep the engine's cores occupied."""
    from triton_openai.cli import API_KEY_ENV

    env = {e["name"]: e for e in release.frontend.container["env"]}
    key = release.frontend._secret_value(env[API_KEY_ENV]["valueFrom"]["secretKeyRef"])
    url = f"http://127.0.0.1:{release.frontend.port_of('openai')}/v1/completions"
    body = json.dumps({"model": "vllm_model", "prompt": "Hello", "max_tokens": 2000,
                       "ignore_eos": True}).encode()

    def generate():
        req = urllib.request.Request(url, data=body, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(req, timeout=300) as resp:
            return json.load(resp)["usage"]["completion_tokens"]

    live = release.probe(release.server, "livenessProbe")
    metrics = f"http://127.0.0.1:{release.server.port_of('metrics')}/metrics"
    def running() -> float:
        text = urllib.request.urlopen(metrics, timeout=10).read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("vllm:num_requests_running{"))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(generate) for _ in range(16)]
        deadline = time.monotonic() + 30
        while running() < 8 and time.monotonic() < deadline:
            time.sleep(0.2)
        busy = running()
        results = [live.timed_check() for _ in range(3)]
        busy = min(busy, running())
        tokens = [f.result() for f in futures]
    assert all(t == 2000 for t in tokens)
    assert busy >= 8, f"the engine was not busy ({busy} requests running)"
    for ok, why, took in results:
        assert ok and took < live.timeout, f"liveness {why} in {took:.1f} s while busy"


def test_readiness_fails_when_the_engine_dies(release):
    """Last (it breaks the pod): kill vLLM's engine process; the next request finds it
    dead, the backend's health check unloads the model, and the readiness probe fails
    within its budget, while liveness (Triton itself) still passes: the pod leaves the
    Service instead of being restarted mid-flight by liveness."""
    killed = docker("exec", release.server.cid, "python3", "-c",
                    "import os, signal\n"
                    "for p in set(filter(str.isdigit, os.listdir('/proc'))) - {str(os.getpid())}:\n"
                    "    try: cmd = open(f'/proc/{p}/cmdline', 'rb').read()\n"
                    "    except OSError: continue\n"
                    "    if b'EngineCore' in cmd: os.kill(int(p), signal.SIGKILL); print(p)\n")
    assert killed.stdout.split(), "no EngineCore process found in the Triton pod"
    http = f"http://127.0.0.1:{release.server.port_of('http')}"
    body = json.dumps({"text_input": "Hello", "parameters": {"max_tokens": 2}}).encode()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(urllib.request.Request(
            f"{http}/v2/models/vllm_model/generate", data=body), timeout=60)
    ready = release.probe(release.server, "readinessProbe")
    deadline = time.monotonic() + ready.budget
    while ready.check()[0]:
        assert time.monotonic() < deadline, \
            f"still ready {ready.budget} s after the engine died\n{release.logs()}"
        time.sleep(1)
    ok, why = release.probe(release.server, "livenessProbe").check()
    assert ok, f"liveness failed after the engine died: {why}"

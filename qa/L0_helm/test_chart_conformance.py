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
import threading
import time
import urllib.error
import urllib.request

import pytest

from qa.common import chart, series_total
from qa.common.docker import docker
from qa.common.http_calls import http_status
from qa.common.kubelet import Probe

from .release import run_helm_tests, started_release, until

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    yield from started_release(tmp_path_factory)


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
    ok, why = until(probe, probe.budget)
    assert ok, f"{kind}: {why}\n{release.logs()}"


def test_readiness_probe_fails_for_a_model_that_is_not_there(release):
    """The probe really checks the models it names (no probe that cannot fail)."""
    spec = json.loads(json.dumps(release.server.container["readinessProbe"]))
    assert chart.required_models(spec) == ["vllm_model"]
    spec["httpGet"]["path"] += "&model=no_such_model"
    ok, why = Probe(release.server, spec).check()
    assert not ok and why == "HTTP 503"


def test_helm_test_pods_pass_against_the_services(release):
    run_helm_tests(release)


def test_openai_service_requires_the_generated_key(release):
    url = f"http://127.0.0.1:{release.frontend.port_of('openai')}/v1/models"
    assert http_status(url, timeout=10) == 401


def test_liveness_holds_while_the_engine_is_busy(release):
    """Liveness must not restart a pod that is only busy: run it, with its own timeout,
    while 16 clients keep long generations going and the engine reports them running.

    The load is held, not sent once: on a 2-core machine, 16 requests sent together have
    reached the engine over as much as 5 s, about the time each one takes, so a single
    round can be over before the engine shows them running together."""
    from triton_openai.cli import API_KEY_ENV

    # The Service sends clients only to a ready frontend pod.
    ready = release.probe(release.frontend, "readinessProbe")
    ok, why = until(ready, ready.budget)
    assert ok, f"the frontend pod is not ready: {why}"
    env = {e["name"]: e for e in release.frontend.container["env"]}
    key = release.frontend._secret_value(env[API_KEY_ENV]["valueFrom"]["secretKeyRef"])
    url = f"http://127.0.0.1:{release.frontend.port_of('openai')}/v1/completions"
    body = json.dumps({"model": "vllm_model", "prompt": "Hello", "max_tokens": 2000,
                       "ignore_eos": True}).encode()
    stop = threading.Event()
    unavailable = []  # the 503s answered: retried, as OpenAI's clients retry them

    def generate_until_stopped() -> list[int]:
        tokens = []
        retries = 0
        while not stop.is_set():
            req = urllib.request.Request(url, data=body, headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
            try:
                with urllib.request.urlopen(req, timeout=300) as resp:
                    tokens.append(json.load(resp)["usage"]["completion_tokens"])
                retries = 0
            except urllib.error.HTTPError as err:
                said = f"{err.code} after {len(tokens)} completions: " \
                       f"{err.read().decode(errors='replace')}"
                # A 503 with Retry-After asks the client to come back, and OpenAI's SDK
                # does, twice: so do these clients, and anything else fails the test.
                if err.code != 503 or "Retry-After" not in err.headers or retries == 2:
                    raise AssertionError(said) from None
                unavailable.append(said)
                retries += 1
                time.sleep(float(err.headers["Retry-After"]))
        return tokens

    live = release.probe(release.server, "livenessProbe")
    metrics = f"http://127.0.0.1:{release.server.port_of('metrics')}/metrics"

    def running() -> float:
        page = urllib.request.urlopen(metrics, timeout=10).read().decode()
        return series_total(page, "vllm:num_requests_running")

    seen = []  # (seconds, requests running): the failure message shows the ramp
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        try:
            futures = [pool.submit(generate_until_stopped) for _ in range(16)]
            started = time.monotonic()
            while time.monotonic() - started < 60:
                seen.append((round(time.monotonic() - started, 1), running()))
                if seen[-1][1] >= 12:
                    break
                time.sleep(0.2)
            results = [live.timed_check() for _ in range(3)]
            seen.append((round(time.monotonic() - started, 1), running()))
        finally:
            stop.set()
        done = [f.result() for f in futures]
    assert all(t == 2000 for tokens in done for t in tokens), done
    busy = [n for _, n in seen[-2:]]
    assert min(busy) >= 8, \
        f"the engine was not busy around the checks: {seen}; 503s retried: {unavailable}"
    for ok, why, took in results:
        assert ok and took < live.timeout, f"liveness {why} in {took:.1f} s while busy"


def test_a_dead_engine_takes_the_pod_out_and_exits_its_container(release):
    """Last (it breaks the pod): kill vLLM's engine process.  The image's model watch
    sees the model answer that it is dead and exits the Triton container non-zero, which
    a kubelet restarts (restartPolicy Always; the stand-in only runs pods, so this checks
    the exit the kubelet acts on); the Triton pod's readiness fails, and so does the
    frontend pod's, which stops the Service sending it clients."""
    killed = docker("exec", release.server.cid, "python3", "-c",
                    "import os, signal\n"
                    "for p in set(filter(str.isdigit, os.listdir('/proc'))) - {str(os.getpid())}:\n"
                    "    try: cmd = open(f'/proc/{p}/cmdline', 'rb').read()\n"
                    "    except OSError: continue\n"
                    "    if b'EngineCore' in cmd: os.kill(int(p), signal.SIGKILL); print(p)\n")
    assert killed.stdout.split(), "no EngineCore process found in the Triton pod"
    started = time.monotonic()
    exited = docker("wait", release.server.cid, timeout=60).stdout.strip()
    took = time.monotonic() - started
    assert exited == "4", f"exit status {exited}\n{release.logs()}"
    assert took < release.probe(release.server, "livenessProbe").budget
    assert not release.probe(release.server, "readinessProbe").check()[0]
    frontend_ready = release.probe(release.frontend, "readinessProbe")
    deadline = time.monotonic() + frontend_ready.budget
    while frontend_ready.check()[0]:
        assert time.monotonic() < deadline, \
            f"the frontend pod still ready {frontend_ready.budget} s after Triton exited"
        time.sleep(1)

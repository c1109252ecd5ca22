"""The hostile suite: the chart's pods, run from the real image, attacked as a client that
can reach them would attack them.

One release for the suite (values.yaml beside this file: the chart's defaults, a frontend
pod in front of the Triton pod, a generated API key, the NetworkPolicy on), started and
probed as qa/L0_helm starts it.  The keys come from the Secrets the chart rendered, as the
pods get them.

    TVB_IMAGE or TVB_IMAGE_TAG   the image to run (scripts/run_tests.sh builds
                                 tritonserver-vllm:test in qa/L0_build_image first)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from qa.common.docker import docker
from qa.common.kubelet import PodContainer
from qa.L0_helm.release import Release, started_release

HERE = Path(__file__).parent
MODEL = "vllm_model"  # the chart's default model, as Triton and the OpenAI API name it


def env_value(pod: PodContainer, name: str) -> str:
    """The value a pod's container gets for `name`, its Secret resolved as the kubelet does."""
    for item in pod.container.get("env") or []:
        if item["name"] != name:
            continue
        if "value" in item:
            return str(item["value"])
        return pod._secret_value(item["valueFrom"]["secretKeyRef"])
    raise AssertionError(f"{pod.name}: the chart gives its container no {name}")


@dataclass
class Target:
    """The release under attack, with the keys its pods were given."""
    release: Release
    api_key: str
    model_control_key: str

    @property
    def server(self) -> PodContainer:
        return self.release.server

    def url(self, port: str, pod: PodContainer | None = None) -> str:
        return f"http://127.0.0.1:{(pod or self.server).port_of(port)}"

    def openai(self, **kw) -> httpx.Client:
        """A client of the Triton pod's OpenAI port that sends the API key."""
        return httpx.Client(base_url=self.url("openai"), timeout=kw.pop("timeout", 60),
                            headers={"Authorization": f"Bearer {self.api_key}"}, **kw)


@pytest.fixture(scope="package")
def target(tmp_path_factory) -> Target:
    from triton_openai.cli import API_KEY_ENV
    from triton_openai.triton.credentials import MODEL_CONTROL_KEY_ENV

    for release in started_release(tmp_path_factory, HERE / "values.yaml"):
        server = release.server
        yield Target(release, env_value(server, API_KEY_ENV),
                     env_value(server, MODEL_CONTROL_KEY_ENV))


@dataclass
class HealthWatch:
    """Asks /health/ready every `interval` seconds, on a thread of its own, while a test
    attacks the server: the slowest answer, and every answer that was not a 200."""
    url: str
    interval: float = 0.2
    timeout: float = 10.0
    slowest: float = 0.0
    answers: int = 0
    failures: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    status = client.get(self.url).status_code
                except httpx.HTTPError as e:
                    status = f"{type(e).__name__}: {e}"
                took = time.monotonic() - started
                self.slowest = max(self.slowest, took)
                self.answers += 1
                if status != 200:
                    self.failures.append(f"{status} after {took:.2f} s")
                self._stop.wait(self.interval)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout + 1)


def memory_bytes(pod: PodContainer) -> int:
    """The memory the pod's container uses now (its cgroup's count, as the kubelet reads it)."""
    out = docker("exec", pod.cid, "sh", "-c",
                 "cat /sys/fs/cgroup/memory.current 2>/dev/null "
                 "|| cat /sys/fs/cgroup/memory/memory.usage_in_bytes")
    return int(out.stdout.split()[0])

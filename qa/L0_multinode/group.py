"""A LeaderWorkerSet group of the chart, run as LeaderWorkerSet and the kubelet would run it:
the rendered leader and worker pod templates as containers of the image on one Docker
network, each with the variables LeaderWorkerSet's webhook injects (LWS_LEADER_ADDRESS,
LWS_GROUP_SIZE, LWS_WORKER_INDEX), the leader reachable by its pod's DNS name under the
set's headless Service."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from qa.common import chart
from qa.common.docker import docker
from qa.common.kubelet import PodContainer, Probe, leader_worker_set_env
from qa.L0_helm.release import image_under_test

HERE = Path(__file__).parent


def _cpu_usec(pod: PodContainer) -> int:
    """CPU time so far of the processes running in the container (/proc in its own pid
    namespace: utime + stime, in clock ticks of 1/100 s)."""
    stats = docker("exec", pod.cid, "sh", "-c", "cat /proc/[0-9]*/stat 2>/dev/null",
                   check=False).stdout
    ticks = 0
    for line in stats.splitlines():
        fields = line.rpartition(")")[2].split()  # after the command name, which may hold spaces
        if len(fields) > 12:
            ticks += int(fields[11]) + int(fields[12])
    return ticks * 10_000


class Group:
    """One group (replica 0) of the chart's LeaderWorkerSet, in Docker."""

    def __init__(self, workdir: Path, values_file: Path = HERE / "values-group.yaml",
                 values: dict | None = None, image: str | None = None):
        image = image or image_under_test()
        repository, _, tag = image.rpartition(":")
        self.manifests = chart.render([values_file], {"image": {"repository": repository,
                                                                "tag": tag}, **(values or {})})
        self.lws = chart.find(self.manifests, "LeaderWorkerSet")
        self.templates = self.lws["spec"]["leaderWorkerTemplate"]
        self.size = self.templates["size"]
        self.workdir = workdir
        self.network = f"tvb-lws-{uuid.uuid4().hex[:8]}"
        self.generation = 0
        self.leader: PodContainer | None = None
        self.workers: list[PodContainer] = []
        docker("network", "create", self.network)

    def _pod(self, role: str, index: int) -> PodContainer:
        env = leader_worker_set_env(self.lws, 0, index)
        template = self.templates[f"{role}Template"]
        container = template["spec"]["containers"][0]["name"]
        # A restarted group's pods are new pods: new containers, new emptyDirs.
        name = f"{self.network}-{role}-{index}-g{self.generation}"
        hostnames = (env["LWS_LEADER_ADDRESS"],) if role == "leader" else ()
        return PodContainer(self.manifests, template, container, network=self.network,
                            workdir=self.workdir, name=name, injected_env=env,
                            hostnames=hostnames)

    def start(self, workers: bool = True) -> None:
        """A new group: its leader, then (unless told not to) its workers."""
        self.started = time.monotonic()
        self.leader = self._pod("leader", 0)
        self.leader.start()
        self.workers = [self._pod("worker", i) for i in range(1, self.size)] if workers else []
        for worker in self.workers:
            worker.start()

    def restart(self) -> None:
        """What RecreateGroupOnPodRestart does: every pod of the group goes, a new group
        starts."""
        self.remove_pods()
        self.generation += 1
        self.start()

    def probe(self, kind: str) -> Probe:
        return Probe(self.leader, self.leader.container[kind])

    def start_up(self) -> float:
        """The leader's startup probe until it passes (seconds from the group's start), as
        the kubelet runs it; fails the test when the budget is spent or a pod exits."""
        startup = self.probe("startupProbe")
        while True:
            elapsed = time.monotonic() - self.started
            for pod in [self.leader, *self.workers]:
                if not pod.running():
                    pytest.fail(f"{pod.name} exited during start-up:\n{self.logs()}")
            ok, why = startup.check()
            if ok:
                return elapsed
            if elapsed > startup.budget:
                pytest.fail(f"startup probe still failing after {startup.budget} s ({why})\n"
                            f"{self.logs()}")
            time.sleep(1)

    def url(self, port: str = "openai") -> str:
        return f"http://127.0.0.1:{self.leader.port_of(port)}"

    def cpu_usec(self) -> list[int]:
        """CPU time so far of the leader and each worker."""
        return [_cpu_usec(p) for p in [self.leader, *self.workers]]

    def logs(self) -> str:
        pods = [p for p in [self.leader, *self.workers] if p is not None and p.cid]
        return "\n".join(f"--- {p.name} ---\n{p.logs(tail=80)}" for p in pods)

    def remove_pods(self) -> None:
        for pod in [self.leader, *self.workers]:
            if pod is not None:
                pod.remove()

    def stop(self) -> None:
        self.remove_pods()
        docker("network", "rm", self.network, check=False)

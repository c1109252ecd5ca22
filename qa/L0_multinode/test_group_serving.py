"""One engine across a LeaderWorkerSet group, run from the image as the chart renders it.

The chart's leader and worker pods (values-group.yaml: the image's sample model, pipeline
parallel 2, one layer a pod) start as two containers on one network with LeaderWorkerSet's
variables (group.py).  The group must:

- serve the OpenAI and KServe endpoints through the leader, greedy outputs equal, token
  for token, to one container serving the same model (values-single.yaml);
- run the engine in both pods: each container's CPU time grows with load;
- end in-flight streams with an error within 2 s of the worker's death, fail the leader's
  readiness and liveness within their budgets, and end the leader, so that LeaderWorkerSet
  (RecreateGroupOnPodRestart) starts the group again; a new group serves;
- fail the leader's start, naming the missing worker, when a worker never joins.

    TVB_IMAGE or TVB_IMAGE_TAG   the image to run
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from qa.common.http_calls import fetch_json
from qa.L0_helm.release import started_release, until
from qa.L0_lifecycle.streams import StreamResult, stream

from .group import HERE, Group

pytestmark = pytest.mark.docker

MODEL = "tiny"
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):",
           "Kubernetes schedules pods"]
MAX_TOKENS = 24
FIGURES: dict[str, float] = {}


def _completions(url: str) -> list[tuple[str, int]]:
    out = []
    for prompt in PROMPTS:
        body = {"model": MODEL, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                "ignore_eos": True}
        answer = fetch_json(f"{url}/v1/completions", body, timeout=60)
        out.append((answer["choices"][0]["text"], answer["usage"]["completion_tokens"]))
    return out


def _kserve(url: str) -> list[str]:
    out = []
    for prompt in PROMPTS:
        body = {"text_input": prompt, "parameters": {"max_tokens": MAX_TOKENS,
                                                     "temperature": 0, "ignore_eos": True}}
        out.append(fetch_json(f"{url}/v2/models/{MODEL}/generate", body,
                              timeout=60)["text_output"])
    return out


def _tokens_per_second(url: str, streams: int = 16, max_tokens: int = 128) -> float:
    async def run():
        body = {"model": MODEL, "prompt": PROMPTS[0], "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True}
        async with httpx.AsyncClient(timeout=120) as client:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(stream(client, f"{url}/v1/completions", body)
                                             for _ in range(streams)))
            took = time.perf_counter() - t0
        assert all(r.finished for r in results), [r.kind() for r in results]
        return streams * max_tokens / took
    return asyncio.run(run())


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One container's outputs and speed, taken before the group starts (two cores)."""
    releases = started_release(tmp_path_factory, HERE / "values-single.yaml")
    release = next(releases)
    try:
        url = f"http://127.0.0.1:{release.server.port_of('openai')}"
        kserve = f"http://127.0.0.1:{release.server.port_of('http')}"
        FIGURES["single_start_s"] = release.startup_seconds
        FIGURES["single_tok_s"] = _tokens_per_second(url)
        return {"openai": _completions(url), "kserve": _kserve(kserve)}
    finally:
        releases.close()  # stopped before the group starts


@pytest.fixture(scope="module")
def group(single, tmp_path_factory):
    running = Group(tmp_path_factory.mktemp("group"))
    try:
        running.start()
        FIGURES["group_start_s"] = running.start_up()
        yield running
    finally:
        running.stop()
        print("figures: " + ", ".join(f"{k}={v:.1f}" for k, v in FIGURES.items()))


def test_the_group_serves_what_one_container_serves(group, single):
    assert _completions(group.url()) == single["openai"]
    assert _kserve(group.url("http")) == single["kserve"]
    assert all(tokens == MAX_TOKENS for _, tokens in single["openai"])


def test_both_pods_run_the_engine(group):
    idle_before = group.cpu_usec()
    time.sleep(3)
    idle = [b - a for a, b in zip(idle_before, group.cpu_usec(), strict=True)]
    before = group.cpu_usec()
    t0 = time.monotonic()
    FIGURES["group_tok_s"] = _tokens_per_second(group.url())
    loaded = [b - a for a, b in zip(before, group.cpu_usec(), strict=True)]
    seconds = time.monotonic() - t0
    # Each pod spent CPU on the load, at three times its idle rate or more.
    for role, busy, rest in zip(("leader", "worker"), loaded, idle, strict=True):
        assert busy > 0.3e6 and busy / seconds > 3 * (rest / 3), (
            f"{role}: {busy / 1e6:.2f} s CPU under load in {seconds:.1f} s, "
            f"{rest / 1e6:.2f} s idle in 3 s")
    print(f"CPU under load (s): leader {loaded[0] / 1e6:.2f}, worker {loaded[1] / 1e6:.2f}; "
          f"idle 3 s: leader {idle[0] / 1e6:.2f}, worker {idle[1] / 1e6:.2f}")


def test_a_lost_worker_ends_the_group_and_a_new_group_serves(group):
    """Last: it ends the group (and starts another)."""
    ends: list[tuple[StreamResult, float]] = []

    async def streams_through_the_kill():
        body = {"model": MODEL, "prompt": PROMPTS[1], "max_tokens": 900, "temperature": 0,
                "ignore_eos": True, "stream": True}
        started = asyncio.Event()
        async with httpx.AsyncClient(timeout=60) as client:
            async def one():
                result = await stream(client, f"{group.url()}/v1/completions", body, started)
                ends.append((result, time.monotonic()))
            tasks = [asyncio.create_task(one()) for _ in range(4)]
            await asyncio.wait_for(started.wait(), 30)
            await asyncio.sleep(0.5)
            killed = time.monotonic()
            await asyncio.to_thread(group.workers[0].kill)
            await asyncio.gather(*tasks)
            return killed

    killed = asyncio.run(streams_through_the_kill())
    for result, ended in ends:
        assert result.told and result.chunks > 0, result.kind()
        assert ended - killed < 2.0, f"a stream ended {ended - killed:.1f} s after the kill"
    FIGURES["streams_end_s"] = max(e for _, e in ends) - killed
    for kind in ("readinessProbe", "livenessProbe"):
        probe = group.probe(kind)
        # Fails within its budget (or the container is already gone).
        failed_by = time.monotonic() + probe.budget
        while time.monotonic() < failed_by and group.leader.running():
            ok, _ = probe.check()
            if not ok:
                break
            time.sleep(min(1.0, probe.period))
        else:
            assert not group.leader.running(), f"{kind} still passes {probe.budget} s on"
        FIGURES[f"{kind}_fails_s"] = time.monotonic() - killed
    # The leader ends (the image's watch), so that the group is recreated.
    assert group.leader.wait_exit(60) is not None, f"the leader still runs 60 s on\n{group.logs()}"
    FIGURES["leader_exits_s"] = time.monotonic() - killed
    assert "worker 1 of the group" in group.leader.logs(tail=400), group.logs()

    group.restart()
    FIGURES["restarted_start_s"] = group.start_up()
    ok, why = until(group.probe("readinessProbe"), 30)
    assert ok, why
    assert len(_completions(group.url())) == len(PROMPTS)


def test_a_worker_that_never_joins_fails_the_leaders_start(single, tmp_path_factory):
    lonely = Group(tmp_path_factory.mktemp("lonely"),
                   values={"multiNode": {"joinTimeoutSeconds": 20}})
    try:
        lonely.start(workers=False)
        budget = lonely.probe("startupProbe").budget
        status = lonely.leader.wait_exit(budget)
        took = time.monotonic() - lonely.started
        assert status is not None, f"the leader still starts after {budget} s"
        assert took < budget
        log = lonely.leader.logs(tail=400)
        assert ("worker 1 of the group (size 2) did not join within 20 s" in log), log
        FIGURES["missing_worker_fails_s"] = took
    finally:
        lonely.stop()

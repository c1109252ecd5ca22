"""A process of the serving stack dies (SIGKILL from the host) while streams are producing:
a new request is refused (5xx or no connection) within 2 s, no stream hangs, every one
whose tokens were not all made yet ends with an error event (or, for the frontend itself,
a cut connection), and the container exits non-zero so that a restart policy restarts it.

The container runs the image's default command: tritonserver, the OpenAI frontend and the
model watch (triton_vllm_backend/watch.py); vLLM runs its engine core and its worker as
processes of their own under the Python backend's stub.  The figures (seconds from the
kill to the last stream's end, and to the container's exit) go to the run's figures file.
One more row runs tritonserver and the frontend alone, as a frontend in front of a
Triton without that watch has them: the frontend's own watch must tell of a dead engine.

A suite of its own, apart from qa/L0_image's quick checks of the image: each row starts a
container and loads it for the better part of a minute.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from qa.common import ServedProcess
from qa.common.figures import record
from qa.common.sse import iter_events
from qa.L0_image.conftest import READY_TIMEOUT, docker, serve
from qa.L0_reliability.processes import host_pids

pytestmark = pytest.mark.docker

STREAMS = 4
FIRST_STREAM_TOKENS, STREAM_TOKENS = 100, 2000
STREAM_END_S = 2.0     # kill to the end of every stream, at most
# Kill to the container's exit, at most: a dead frontend lets tritonserver drain what it
# had in flight (SHUTDOWN_GRACE_SECONDS, 20 s by default) before it stops.
EXIT_S = 45.0

# The exit statuses the container may end with when each process is killed: the watch's
# MODEL_DEAD (4) when a model died under a live tritonserver, the dead process's own
# 128+9 otherwise.  A stub killed while it held the lock of its shared memory with
# tritonserver takes tritonserver down with it: Triton's Python backend then throws
# boost::interprocess::lock_exception and tritonserver aborts (134), before the watch has
# seen the model die (seen once in a full run).  tritonserver has also died of a
# segmentation fault (139) as a killed worker took its engine core down with it (seen once
# in a full run, the streams told and new requests refused within 0.22 s): the engine core
# dies in both rows, so both allow it.  Every one of these exits gets the container
# restarted.
EXIT_STATUSES = {
    "engine core": {4, 139},
    "worker": {4, 139},
    "stub": {4, 134},
    "tritonserver": {137},
    "frontend": {137},
}


class Streams(threading.Thread):
    """Completion streams, one after another until `stop`: a short one that proves the
    stack serves, then long ones (2,000 tokens: 5-30 s each with four at once on 2 cores,
    where the first rounds of long ones took half a row): whichever is in flight when the
    kill lands is the one that must end with an error.  Records each stream's (start,
    end, how it ended)."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.events = 0
        self.stop = threading.Event()
        self.ends: list[tuple[float, float, str]] = []

    def run(self) -> None:
        tokens = FIRST_STREAM_TOKENS
        while not self.stop.is_set():
            started = time.monotonic()
            end = self._one(tokens)
            tokens = STREAM_TOKENS
            self.ends.append((started, time.monotonic(), end))
            if not end.startswith("finished"):
                break  # the server is gone or failing: what comes next proves nothing

    def _one(self, tokens: int) -> str:
        body = {"model": "vllm_model", "prompt": "Once upon a time", "max_tokens": tokens,
                "ignore_eos": True, "stream": True}
        end = finish = None
        try:
            with httpx.stream("POST", self.url, json=body, timeout=120) as r:
                if r.status_code != 200:
                    return f"HTTP {r.status_code}: {r.read().decode(errors='replace')[:200]}"
                for event in iter_events(r):
                    if event.done:
                        if end:
                            return end
                        return f"finished: {finish}" if finish else "[DONE] without an end"
                    payload = event.json()
                    if "error" in payload:
                        end = "error event: " + payload["error"]["message"][:160]
                        continue
                    finish = payload["choices"][0].get("finish_reason") or finish
                    self.events += 1
            return end or "closed without [DONE]"
        except httpx.HTTPError as err:
            return f"cut: {type(err).__name__}"

    def in_flight_at(self, moment: float) -> tuple[float, str] | None:
        """(seconds from `moment` to its end, how it ended) of the stream running then."""
        for started, ended, end in self.ends:
            if started <= moment <= ended:
                return ended - moment, end
        return None


def refused(url: str, since: float, within: float = 10.0) -> tuple[float, str]:
    """(seconds from `since` to the first new request the server does not serve, how it
    was refused), asking every 0.1 s."""
    body = {"model": "vllm_model", "prompt": "Once upon a time", "max_tokens": 1}
    deadline = since + within
    while True:
        try:
            r = httpx.post(url, json=body, timeout=within)
            answer = f"HTTP {r.status_code}: {r.text[:200]}"
            served = r.status_code == 200
        except httpx.HTTPError as err:
            answer, served = f"cut: {type(err).__name__}", False
        if not served or time.monotonic() >= deadline:
            return time.monotonic() - since, answer
        time.sleep(0.1)


def _listed(ends: list[str], logs: str) -> str:
    """How each stream in flight ended, a line each, then the container's log."""
    return "\n".join(["streams in flight at the kill ended:", *ends, "log:", logs])


def kill_mid_stream(url: str, pids: list[int], logs) -> tuple[list[Streams], float]:
    """Start STREAMS streams on `url`, SIGKILL `pids` while they produce; the streams and
    the moment of the kill.  `logs()` is the server's log, for the errors."""
    streams = [Streams(url) for _ in range(STREAMS)]
    for stream in streams:
        stream.start()
    # The kill lands a second into the second round of streams, the long ones:
    # mid-generation for all of them, once the short first round has served.
    deadline = time.monotonic() + 180
    while not all(s.ends for s in streams):
        assert time.monotonic() < deadline, f"no round of streams ended\n{logs()}"
        time.sleep(0.05)
    time.sleep(1.0)
    for stream in streams:
        assert all(end.startswith("finished") for _, _, end in stream.ends), (
            f"a stream failed before the kill: {stream.ends}\n{logs()}")
    # Still producing when the kill lands: a process starved on 2 cores can stall for
    # seconds (seen: over 5 s in a full run), and a kill between two tokens of every
    # stream proves less.
    counts = sum(s.events for s in streams)
    deadline = time.monotonic() + 30
    while sum(s.events for s in streams) == counts:
        assert time.monotonic() < deadline, (
            f"the streams stalled for 30 s before the kill\n{logs()}")
        time.sleep(0.01)
    killed = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return streams, killed


def cut_by_the_kill(streams: list[Streams], killed: float) -> list[tuple[float, str]]:
    """(seconds from the kill to its end, how it ended) of each stream in flight at the
    kill that had not come to its end by itself.  Under load the engine can be seconds
    ahead of the pipeline that carries its tokens: the streams whose tokens were all made
    (and passed the killed process) finish."""
    hit = [s.in_flight_at(killed) for s in streams]
    return [h for h in hit if h is not None and not h[1].startswith("finished")]


@pytest.mark.parametrize("process", list(EXIT_STATUSES))
def test_a_killed_process_ends_every_stream_and_the_container(image, process):
    statuses = EXIT_STATUSES[process]
    served = serve(image)
    url = f"http://127.0.0.1:{served.openai}/v1/completions"
    try:
        # Found first: `docker top` can take seconds on a loaded machine, and the kill
        # must land while the streams run.
        pids = host_pids(served.cid, process)
        assert pids, f"no {process} process in the container"
        streams, killed = kill_mid_stream(url, pids, served.logs)
        for stream in streams:
            stream.stop.set()
        refused_after, refusal = refused(url, killed)
        for stream in streams:
            stream.join(timeout=STREAM_END_S + 60)
        code = served.box.wait_exit(EXIT_S)
        exited = time.monotonic() - killed
        logs = served.logs()
        # Searched whole: a dying engine's traceback alone can fill the tail.
        whole_log = served.box.log
    finally:
        docker("rm", "-f", served.cid, check=False)
    # The server says at once that it cannot serve: a new request is refused, a server
    # fault (5xx or no connection), never a 4xx.
    record(f"kill_{process.replace(' ', '_')}_refused_s", round(refused_after, 2), "s",
           f"SIGKILL of the {process} to the first new request refused")
    assert refused_after <= STREAM_END_S, (
        f"still served {refused_after:.1f} s after the kill: {refusal}\n{logs}")
    assert refusal.startswith(("HTTP 5", "cut")), f"{refusal}\n{logs}"
    in_flight = cut_by_the_kill(streams, killed)
    record(f"kill_{process.replace(' ', '_')}_container_exit_s", round(exited, 2), "s",
           f"SIGKILL of the {process} to the container's exit ({code})")
    if in_flight:
        _check_cut_streams(process, in_flight, logs)
    assert code in statuses, f"exit status {code} after {exited:.1f} s\n{logs}"
    if code == 4:
        assert "cannot serve" in whole_log, logs
    elif code == 134:
        assert "boost::interprocess::lock_exception" in whole_log, logs


def _check_cut_streams(process: str, in_flight: list[tuple[float, str]], logs: str,
                       figure: str = "kill") -> None:
    """The streams the kill cut end within STREAM_END_S, each as a client can tell."""
    last_end = max(took for took, _ in in_flight)
    ends = [end for _, end in in_flight]
    record(f"{figure}_{process.replace(' ', '_')}_streams_end_s", round(last_end, 2), "s",
           f"SIGKILL of the {process} to the end of the last of {STREAMS} streams")
    assert last_end <= STREAM_END_S, f"streams ended {last_end:.1f} s after the kill: {ends}"
    if process == "frontend":
        # Nothing else can answer them: the connection is cut, or closed mid-stream.
        assert all(e.startswith(("cut", "closed without")) for e in ends), _listed(ends, logs)
    else:
        # An error event, or for a stream that reached the server as the kill landed, a
        # refusal: a server fault, 5xx, never a 4xx.  With tritonserver or a stub gone the
        # frontend stops too: it waits (LINGER_S) for its clients to read what it sent
        # them before the container, and its network, goes.  A client starved for longer
        # than that on a busy 2-core host still finds its stream cut (seen in 2 of 13
        # runs of the tritonserver row, the frontend counting none in flight).
        told = ("error event", "HTTP 5")
        if process in ("tritonserver", "stub"):
            told += ("cut", "closed without")
        assert all(e.startswith(told) for e in ends), _listed(ends, logs)


# Triton and the frontend with nothing else beside them, as the chart's frontend-only mode
# or a user's own Triton has them: no model watch stops tritonserver when an engine dies.
UNWATCHED = ("tritonserver --model-repository=/opt/tritonserver/model_repository"
             " --backend-directory=/opt/tritonserver/backends --log-info=false &"
             " exec triton-openai --triton-url http://localhost:8000 --host 0.0.0.0"
             " --port 9000")


def test_a_frontend_alone_before_a_dead_engine_says_so_itself(image):
    """Without the image's model watch nothing stops a Triton whose engine died: it stays
    ready.  The frontend's own watch sees the model dead: its streams end with an error
    event, readiness turns 503 naming the model, and new requests get a 503
    (service_unavailable, with Retry-After), each within STREAM_END_S of the kill."""
    served = serve(image, command=("bash", "-c", UNWATCHED))
    base = f"http://127.0.0.1:{served.openai}"
    try:
        served.box.wait_http("openai", "/health/ready", timeout=READY_TIMEOUT)
        pids = host_pids(served.cid, "engine core")
        assert pids, "no engine core process in the container"
        streams, killed = kill_mid_stream(base + "/v1/completions", pids, served.logs)
        for stream in streams:
            stream.stop.set()
        while (ready := httpx.get(base + "/health/ready", timeout=10)).status_code == 200:
            assert time.monotonic() - killed < 30, "still ready 30 s after the kill"
            time.sleep(0.05)
        not_ready_after = time.monotonic() - killed
        refused_after, refusal = refused(base + "/v1/completions", killed)
        answer = httpx.post(base + "/v1/completions", timeout=10, json={
            "model": "vllm_model", "prompt": "Once upon a time", "max_tokens": 1})
        for stream in streams:
            stream.join(timeout=STREAM_END_S + 60)
        still_running = served.box.exit_status() is None
        logs = served.logs()
    finally:
        docker("rm", "-f", served.cid, check=False)
    record("unwatched_engine_core_not_ready_s", round(not_ready_after, 2), "s",
           "SIGKILL of the engine core to the frontend's readiness 503, Triton unwatched")
    record("unwatched_engine_core_refused_s", round(refused_after, 2), "s",
           "SIGKILL of the engine core to the first new request refused, Triton unwatched")
    assert not_ready_after <= STREAM_END_S, logs
    assert "vllm_model" in ready.text, ready.text
    assert refused_after <= STREAM_END_S, (
        f"still served {refused_after:.1f} s after the kill: {refusal}\n{logs}")
    assert refusal.startswith("HTTP 503"), f"{refusal}\n{logs}"
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["type"] == "service_unavailable", answer.text
    assert int(answer.headers["Retry-After"]) > 0, answer.headers
    in_flight = cut_by_the_kill(streams, killed)
    if in_flight:
        _check_cut_streams("engine core", in_flight, logs, figure="unwatched")
    # Nothing here restarts tritonserver: that is the orchestrator's, on the readiness
    # and liveness of Triton's own pod.  The frontend keeps running, and serves again once
    # its model does.
    assert still_running, logs


def test_a_start_that_does_not_finish_in_time_exits_non_zero(image):
    """START_TIMEOUT_SECONDS bounds the start (a stub launch that wedges must end in a
    restart, not a container that never serves)."""
    box = ServedProcess.container("a start bounded to 2 s", image,
                                  docker_args=["-e", "START_TIMEOUT_SECONDS=2"])
    try:
        code = box.wait_exit(60)
        logs = docker("logs", box.cid, check=False)  # stderr apart: the message goes there
    finally:
        box.stop(timeout=0)
    assert code == 3, logs.stdout + logs.stderr
    assert "not ready within 2 s" in logs.stderr

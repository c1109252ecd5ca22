"""Readiness and shutdown of the image, measured as a client sees them.

Runs against a container of $TVB_IMAGE (scripts/run_tests.sh's image pass): the image's
own entrypoint starts tritonserver and the OpenAI frontend.  Prints its figures:

- time to first token of 16 streamed chat completions sent the moment /health/ready
  says 200, against a second (warm) batch: the first may take at most twice as long;
- `docker stop` while streams are in flight: they finish, and the container exits 0;
- `docker stop` with a short grace period: every stream that cannot finish ends with an
  error event, the container exits non-zero and its log names the requests it cut;
- a Triton-only container (tritonserver alone) stopped under streams: none of them ends
  as if it had finished, and the status is non-zero.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import threading
import time

import httpx
import pytest

from qa.common import TritonServer
from tritonbuild.hostenv import docker_binary

from .measure import MODEL, write_repository
from .streams import batch, stream_chat, summary, ttfts, wait_ready

pytestmark = [
    pytest.mark.docker, pytest.mark.e2e,
    pytest.mark.skipif(not os.environ.get("TVB_IMAGE"),
                       reason="checks the image: runs in the image pass (TVB_IMAGE)"),
]

CONCURRENCY = 16
# Long enough that 16 streams cannot finish within the short grace period below.
LONG_ENGINE = {"max_model_len": 2048}  # the tiny model's longest
LONG_TOKENS = 2000


def docker_stop(server: TritonServer, timeout: int = 90) -> tuple[int, float, str]:
    """`docker stop` the container: (its exit status, seconds the stop took, its log)."""
    docker = docker_binary()
    container = server._container
    t0 = time.monotonic()
    subprocess.run([docker, "stop", "-t", str(timeout), container], capture_output=True,
                   check=True)
    took = time.monotonic() - t0
    code = int(subprocess.run([docker, "inspect", "-f", "{{.State.ExitCode}}", container],
                              capture_output=True, text=True, check=True).stdout.strip())
    return code, took, server.logs


async def _streams_then_stop(server, n, max_tokens, wait_first: bool):
    """n streams; once all produce (or at once), `docker stop` in a thread."""
    limits = httpx.Limits(max_connections=n + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0), limits=limits) as client:
        firsts = [asyncio.Event() for _ in range(n)]
        tasks = [asyncio.ensure_future(stream_chat(client, server.openai_url, MODEL, max_tokens,
                                                   f)) for f in firsts]
        if wait_first:
            await asyncio.wait_for(asyncio.gather(*(f.wait() for f in firsts)), 120)
        else:
            await asyncio.sleep(0.2)  # sent, and waiting for their first token
        stopped: dict = {}
        stopper = threading.Thread(target=lambda: stopped.update(zip(
            ("code", "took", "log"), docker_stop(server), strict=True)))
        stopper.start()
        results = await asyncio.gather(*tasks)
    stopper.join(120)
    return results, stopped


@pytest.fixture
def image_server(tmp_path, tiny_model):
    servers = []

    def start(grace: int, engine_args=None, server_args=()) -> TritonServer:
        repo = write_repository(tmp_path / f"r{len(servers)}", tiny_model,
                                engine_args=engine_args)
        server = TritonServer(repo, mounts=[tiny_model], wait_ready=False,
                              env={"SHUTDOWN_GRACE_SECONDS": str(grace)},
                              server_args=server_args)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


def test_first_batch_after_ready_is_served_at_full_speed_and_stop_drains(image_server):
    server = image_server(grace=30)
    ready_after = wait_ready(server.openai_url, 420)
    first = ttfts(asyncio.run(batch(server.openai_url, MODEL, CONCURRENCY)))
    warm = ttfts(asyncio.run(batch(server.openai_url, MODEL, CONCURRENCY)))
    print(f"\nfrontend ready after {ready_after:.1f} s")
    print(summary("time to first token, first batch right after ready", first))
    print(summary("time to first token, warm batch", warm))
    assert statistics.median(first) <= 2 * statistics.median(warm) + 0.05, (first, warm)

    results, stopped = asyncio.run(_streams_then_stop(server, 4, 64, wait_first=True))
    print(f"docker stop with 4 streams in flight: {stopped['took']:.1f} s, "
          f"exit status {stopped['code']}, streams: {[r.kind() for r in results]}")
    assert all(r.finished for r in results), [r.kind() for r in results]
    assert stopped["code"] == 0, stopped["log"][-3000:]
    assert "every request finished" in stopped["log"]


def test_streams_that_cannot_finish_end_with_an_error_event(image_server):
    # Fresh streams, waiting for their first token when the stop comes: the case where
    # clients used to get an empty, well-formed stream.  (Streams already producing are
    # cut the same way: tests/frontends/openai/test_shutdown.py.)
    server = image_server(grace=2, engine_args=LONG_ENGINE)
    wait_ready(server.openai_url, 420)
    results, stopped = asyncio.run(_streams_then_stop(server, CONCURRENCY, LONG_TOKENS,
                                                      wait_first=False))
    kinds = [r.kind() for r in results]
    print(f"\ndocker stop (grace 2 s) with {CONCURRENCY} long streams "
          f"waiting for their first token: "
          f"{stopped['took']:.1f} s, exit status {stopped['code']}, streams: "
          f"{ {k: kinds.count(k) for k in set(kinds)} }")
    assert not any(r.silent for r in results), kinds
    cut = [r for r in results if r.told]
    assert cut, "some of the long streams must have been cut"
    for r in cut:
        assert r.errors[-1]["type"] == "service_unavailable", r.errors
        assert r.status != 200 or r.done
    assert stopped["code"] != 0
    assert "grace period over; cutting POST /v1/chat/completions" in stopped["log"]
    assert "stopped after cutting" in stopped["log"]


def test_a_triton_only_container_never_ends_a_cut_stream_as_if_finished(image_server):
    # tritonserver alone (no frontend), as a Triton-only image runs it.  When its exit
    # timeout runs out under streams, tritonserver exits without unloading the models, so
    # the backend cannot answer them: the client must at least see a broken stream (or an
    # error, where the model did unload), never a well-formed end, and the status must
    # say that work was abandoned.
    server = image_server(grace=2, engine_args=LONG_ENGINE,
                          server_args=["--exit-timeout-secs=2"])
    wait_ready(server.http_url, 420, "/v2/health/ready")
    body = {"text_input": "Tell me a story.", "stream": True,
            "parameters": {"max_tokens": LONG_TOKENS, "ignore_eos": True}}
    outcomes: list[str] = []
    started = threading.Barrier(CONCURRENCY + 1, timeout=120)

    def one():
        last, n = None, 0
        try:
            with httpx.stream("POST", f"{server.http_url}/v2/models/{MODEL}/generate_stream",
                              json=body, timeout=120) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        n += 1
                        if n == 1:
                            started.wait()
                        last = line
        except httpx.HTTPError as err:
            outcomes.append(f"broken {type(err).__name__}")
            return
        outcomes.append("error" if last and '"error"' in last else f"ended after {n}")

    threads = [threading.Thread(target=one) for _ in range(CONCURRENCY)]
    for t in threads:
        t.start()
    started.wait()
    code, took, log = docker_stop(server)
    for t in threads:
        t.join(60)
    print(f"\nTriton alone, docker stop with {CONCURRENCY} long streams: {took:.1f} s, "
          f"exit status {code}, streams: { {k: outcomes.count(k) for k in set(outcomes)} }")
    assert len(outcomes) == CONCURRENCY
    assert not any(o.startswith("ended") for o in outcomes), outcomes
    assert code != 0, log[-3000:]

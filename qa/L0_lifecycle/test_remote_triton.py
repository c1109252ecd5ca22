"""The frontend run on its own against a Triton elsewhere, which goes away mid-stream:
the streams end with an error event, and the frontend's readiness turns false."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from qa.common import TritonServer
from qa.common.http_calls import request_json
from qa.L0_openai.frontend_process import FrontendProcess

from .measure import MODEL, write_repository
from .streams import stream_chat

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.host_mode,  # starts the frontend on this host, against a Triton it stops
]


def test_triton_going_away_mid_stream_ends_streams_with_an_error(tmp_path, tiny_model):
    repo = write_repository(tmp_path, tiny_model, engine_args={"max_model_len": 2048})
    with TritonServer(repo, server_args=["--exit-timeout-secs=1"]) as triton:
        with FrontendProcess(f"http://127.0.0.1:{triton.http_port}", timeout=300) as fe:
            async def run():
                async with httpx.AsyncClient(timeout=120) as client:
                    firsts = [asyncio.Event() for _ in range(4)]
                    tasks = [asyncio.ensure_future(stream_chat(client, fe.url, MODEL, 2000, f))
                             for f in firsts]
                    await asyncio.wait_for(asyncio.gather(*(f.wait() for f in firsts)), 120)
                    t0 = time.monotonic()
                    # tritonserver alone, as `docker stop` signals it: a SIGTERM to its
                    # whole process group would also stop vLLM's engine process at once,
                    # which may end the streams with finish_reason "abort" first.
                    await asyncio.to_thread(triton.terminate)
                    results = await asyncio.gather(*tasks)
                    return results, time.monotonic() - t0

            results, took = asyncio.run(run())
            kinds = [f"{r.kind()} ({r.finish_reason}, {r.chunks} chunks)" for r in results]
            print(f"\nTriton stopped under 4 streams: {took:.1f} s; streams: {kinds}")
            assert all(r.told for r in results), kinds
            assert all(r.done for r in results), "an error event, then [DONE]"
            status, body = request_json(fe.url + "/health/ready", timeout=5)
            assert status == 503 and "Triton" in body["status"], body
            assert request_json(fe.url + "/health/live", timeout=5)[0] == 200

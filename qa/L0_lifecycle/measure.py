"""Time to first token right after readiness, in a container of the image.

    TVB_IMAGE=tritonserver-vllm:test python -m qa.L0_lifecycle.measure [--direct-first]

Starts the image's default command (tritonserver + the OpenAI frontend) on the tiny
model, polls the frontend's /health/ready, and the moment it answers 200 sends a batch of
16 streamed chat completions, then a second batch.  With --direct-first, the first batch
goes to Triton's generate_stream instead (the engine alone), which splits the first
batch's extra wait between the engine and the frontend.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import httpx

from qa.common import TritonServer, tiny_model_path, write_vllm_model
from qa.common.served import wait_for_status
from qa.common.sse import aiter_events

from .streams import batch, summary, ttfts

MODEL = "tiny"
# How often a readiness poll asks, where the first request goes the moment it says 200.
# Such a poll asks the URL alone (wait_for_status() without the server): a `docker
# inspect` for the server's exit every 20 ms would take the CPU its start needs.
READY_POLL_S = 0.02


def write_repository(root: Path, tiny_model: Path, parameters: dict[str, str] | None = None,
                     engine_args: dict | None = None) -> Path:
    repo = root / "models"
    write_vllm_model(repo, MODEL, {"model": str(tiny_model), "max_model_len": 512, "seed": 0,
                                   **(engine_args or {})}, parameters=parameters)
    return repo


async def direct_batch(http_url: str, n: int, max_tokens: int = 16) -> list[float]:
    """n streams straight to Triton's generate_stream: seconds to each one's first event."""
    body = {"text_input": "Tell me a long story about the sea.", "stream": True,
            "parameters": {"temperature": 0, "max_tokens": max_tokens, "ignore_eos": True}}

    async def one(client):
        t0 = time.perf_counter()
        async with client.stream("POST", f"{http_url}/v2/models/{MODEL}/generate_stream",
                                 json=body) as resp:
            async for _ in aiter_events(resp):
                return time.perf_counter() - t0
        raise AssertionError("no event")

    async with httpx.AsyncClient(timeout=300) as client:
        return list(await asyncio.gather(*(one(client) for _ in range(n))))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--direct-first", action="store_true")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--parameter", action="append", default=[], metavar="KEY=VALUE",
                   help="config.pbtxt parameter of the model (e.g. ENGINE_WARMUP=false)")
    args = p.parse_args()
    if not os.environ.get("TVB_IMAGE"):
        raise SystemExit("set TVB_IMAGE to the image to measure")
    params = dict(kv.split("=", 1) for kv in args.parameter)
    tiny = tiny_model_path()
    with tempfile.TemporaryDirectory() as tmp:
        repo = write_repository(Path(tmp), tiny, params)
        t0 = time.monotonic()
        with TritonServer(repo, mounts=[tiny], wait_ready=False) as server:
            wait_for_status(server.openai_url + "/health/ready", timeout=420,
                            interval=READY_POLL_S)
            print(f"frontend ready {time.monotonic() - t0:.1f} s after start")
            if args.direct_first:
                first = asyncio.run(direct_batch(server.http_url, args.concurrency))
                print(summary("first batch, straight to Triton", first))
            else:
                first = ttfts(asyncio.run(batch(server.openai_url, MODEL, args.concurrency)))
                print(summary("first batch, through the frontend", first))
            second = ttfts(asyncio.run(batch(server.openai_url, MODEL, args.concurrency)))
            print(summary("second batch, through the frontend", second))
            third = ttfts(asyncio.run(batch(server.openai_url, MODEL, args.concurrency)))
            print(summary("third batch, through the frontend", third))


if __name__ == "__main__":
    main()

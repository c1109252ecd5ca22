#!/usr/bin/env python3
"""Output tokens/s of vLLM's offline engine vs. Triton's vLLM backend (HTTP generate_stream
and gRPC streaming), on the same model, prompts and sampling, at several concurrencies.

    eval "$(scripts/setup_host.sh)"
    $TVB_VENV/bin/python bench/bench_backend.py [--model DIR] [--max-tokens 128]

Without --model it uses the tiny test model.  Each phase runs alone (the offline engine
first, in a subprocess, then one tritonserver), since all share this machine's cores.
Concurrency c means c requests in flight at all times (c clients each sending the next
request when the previous one ends); offline, it means batches of c prompts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The repository (qa, tritonbuild) and the backend folder, as pytest's `pythonpath` has them.
sys.path[:0] = [str(ROOT), str(ROOT / "backends" / "vllm")]

from qa.common import TritonServer, tiny_model_path, write_vllm_model  # noqa: E402
from qa.common.sse import aiter_events  # noqa: E402
from qa.common.tritonserver import ENGINE_ENV  # noqa: E402

PROMPTS = ["Hello, my name is", "The capital of France is",
           "Once upon a time, in a land far away,", "Write a short poem about the sea"]


def engine_args(model: Path) -> dict:
    return {"model": str(model), "max_model_len": 2048, "disable_log_stats": True}


def sampling(max_tokens: int) -> dict:
    return {"temperature": 0, "max_tokens": max_tokens, "ignore_eos": True}


OFFLINE = r"""
import json, sys, time
from vllm import LLM, SamplingParams
job = json.load(sys.stdin)
llm = LLM(**job["engine_args"])
params = SamplingParams(**job["sampling"])
prompts = job["prompts"]
llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up
results = {}
for c in job["concurrency"]:
    n = max(c * job["rounds"], job["min_requests"])
    batch = [prompts[i % len(prompts)] for i in range(n)]
    started = time.perf_counter()
    tokens = 0
    for i in range(0, n, c):
        outs = llm.generate(batch[i:i + c], params, use_tqdm=False)
        tokens += sum(len(o.outputs[0].token_ids) for o in outs)
    results[c] = tokens / (time.perf_counter() - started)
print("RESULT " + json.dumps(results), flush=True)
"""


def offline(model, concurrency, max_tokens, rounds, min_requests) -> dict[int, float]:
    job = {"engine_args": engine_args(model), "sampling": sampling(max_tokens),
           "prompts": PROMPTS, "concurrency": concurrency, "rounds": rounds,
           "min_requests": min_requests}
    done = subprocess.run([sys.executable, "-c", OFFLINE], input=json.dumps(job),
                          capture_output=True, text=True, env=dict(os.environ, **ENGINE_ENV))
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"offline engine failed:\n{done.stderr[-3000:]}")
    return {int(k): v for k, v in json.loads(lines[-1][7:]).items()}


async def http_stream(server, model, c, n, max_tokens) -> float:
    import httpx

    body = lambda i: {"text_input": PROMPTS[i % len(PROMPTS)], "stream": True,  # noqa: E731
                      "sampling_parameters": json.dumps(sampling(max_tokens)),
                      "return_num_output_tokens": True}
    url = f"{server.http_url}/v2/models/{model}/generate_stream"
    counter = iter(range(n))
    tokens = 0

    async def worker(client):
        nonlocal tokens
        for i in counter:
            async with client.stream("POST", url, json=body(i)) as response:
                async for event in aiter_events(response):
                    tokens += event.json()["num_output_tokens"]

    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=c)) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(c)))
        return tokens / (time.perf_counter() - started)


def grpc_stream(server, model, c, n, max_tokens) -> float:
    import numpy as np
    import tritonclient.grpc as grpcclient

    counter = iter(range(n))
    lock = threading.Lock()
    totals = []

    def worker():
        client = grpcclient.InferenceServerClient(server.grpc_url)
        results: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        tokens = 0
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            inputs = []
            for name, value, dtype in [
                ("text_input", PROMPTS[i % len(PROMPTS)].encode(), "BYTES"),
                ("sampling_parameters", json.dumps(sampling(max_tokens)).encode(), "BYTES"),
                ("stream", True, "BOOL"), ("return_num_output_tokens", True, "BOOL")]:
                t = grpcclient.InferInput(name, [1], dtype)
                t.set_data_from_numpy(np.array([value], dtype=object if dtype == "BYTES" else bool))
                inputs.append(t)
            client.async_stream_infer(model, inputs, enable_empty_final_response=True)
            while True:
                result, error = results.get(timeout=120)
                if error is not None:
                    raise RuntimeError(error)
                count = result.as_numpy("num_output_tokens")
                if count is not None:
                    tokens += int(count.sum())
                if result.get_response().parameters["triton_final_response"].bool_param:
                    break
        client.stop_stream()
        client.close()
        totals.append(tokens)

    threads = [threading.Thread(target=worker) for _ in range(c)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(totals) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="model folder (default: the tiny test model)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=4, help="requests per client")
    parser.add_argument("--min-requests", type=int, default=8)
    args = parser.parse_args()
    model = (args.model or tiny_model_path()).resolve()
    count = lambda c: max(c * args.rounds, args.min_requests)  # noqa: E731

    print(f"model {model}, {args.max_tokens} output tokens per request", flush=True)
    base = offline(model, args.concurrency, args.max_tokens, args.rounds, args.min_requests)
    print("offline done", flush=True)
    http, grpc = {}, {}
    with tempfile.TemporaryDirectory() as repo:
        write_vllm_model(repo, "bench", engine_args(model))
        with TritonServer(repo, mounts=[model]) as server:
            # Warm-up, as offline.
            asyncio.run(http_stream(server, "bench", 2, 2, args.max_tokens))
            for c in args.concurrency:
                http[c] = asyncio.run(http_stream(server, "bench", c, count(c), args.max_tokens))
                grpc[c] = grpc_stream(server, "bench", c, count(c), args.max_tokens)
                print(f"concurrency {c} done", flush=True)

    print()
    print(f"{'concurrency':>11} | {'offline tok/s':>13} | {'HTTP tok/s':>10} | {'gRPC tok/s':>10}"
          f" | {'HTTP/offline':>12} | {'gRPC/offline':>12}")
    print("-" * 84)
    for c in args.concurrency:
        print(f"{c:>11} | {base[c]:>13.0f} | {http[c]:>10.0f} | {grpc[c]:>10.0f}"
              f" | {http[c] / base[c]:>12.2f} | {grpc[c] / base[c]:>12.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Streaming benchmark: this OpenAI frontend vs Triton's generate_stream vs vLLM's server.

In one run, on the same model, prompts and settings, for each concurrency level:
output tokens/s, time to first token (TTFT) and inter-token latency (ITL), p50 and p99.

    eval "$(scripts/setup_host.sh)"
    python bench/bench_openai.py [--concurrency 1,8,32,64] [--output-tokens 128]
    python bench/bench_openai.py --image tritonserver-vllm:24.10-cpu [--rounds 3]

Targets; all servers run side by side, and the targets take turns, level by level, for
--rounds rounds (so a machine that slows down for a while slows them all):
  triton         POST /v2/models/M/generate_stream on a real tritonserver + vLLM backend
  frontend       POST /v1/completions (stream) through `triton-openai` on that same
                 server, over KServe gRPC (--triton-url HOST:GRPC_PORT)
  frontend-http  the same, over Triton's HTTP generate_stream (--triton-url http://...)
  vllm           POST /v1/completions (stream) on `python -m vllm.entrypoints.openai.api_server`
                 (vLLM's own OpenAI server, the module `vllm serve` runs)

For the frontends, the table also gives the frontend process's own CPU time per output
token: what the OpenAI layer costs, whichever way it reaches Triton.

Image mode (`--image IMAGE`) measures containers of a built image instead, one container
at a time, as a user compares them (qa/common/image_servers.py starts them):
  openai-chat         POST /v1/chat/completions (stream) on the image's own entrypoint
                      (the OpenAI frontend in front of tritonserver + vLLM backend)
  triton              POST /v2/models/vllm_model/generate_stream, same container
  vllm-chat           the same chat request to vLLM's own OpenAI server, started in a
                      container of the same image on the same model and engine settings
  inprocess-chat      the same chat request to the OpenAI frontend with Triton in its own
                      process (`triton-openai --model-repository`, no tritonserver)
  openai-completions, vllm-completions   POST /v1/completions, not streamed
Each round starts each container in turn, times `docker run` to ready, runs every level
of its targets and removes it; the table adds the start-to-ready seconds.

Every request asks for exactly --output-tokens tokens (ignore_eos), so all targets do the
same work; tokens are counted from the servers' own usage numbers.  Each level first
runs one request per client, not counted (connections open, the batch fills), then at
least 8 requests per client back to back.  TPOT is vLLM's per-token inter-token latency,
(E2E - TTFT) / (tokens - 1) per request; ITL/event is the gap between events carrying
tokens, shared among the tokens of an event where the server says how many (Triton), one
token per event otherwise (where a server merges tokens into one event, it reads high).
Results go to stdout as a table and to bench/results/bench_openai-TIMESTAMP.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The repository (qa, tritonbuild) and the backend folder, as pytest's `pythonpath` has them.
sys.path[:0] = [str(REPO), str(REPO / "backends" / "vllm")]

import httpx  # noqa: E402

from qa.common import (  # noqa: E402
    ServedProcess,
    TritonServer,
    free_port,
    tiny_model_path,
    write_vllm_model,
)
from qa.common.image_servers import vllm_server_flags  # noqa: E402
from qa.common.models import TEST_ENGINE_DEFAULTS  # noqa: E402
from qa.common.sse import aiter_events  # noqa: E402
from qa.L0_openai.frontend_process import FrontendProcess  # noqa: E402

PROMPTS = [
    "The quick brown fox jumps over the lazy dog and",
    "Inference servers batch requests from many clients",
    "The capital of France is Paris and the capital of Germany",
    "What is the weather like today? It is sunny with",
]
MODEL = "tiny"
# The frontend over each of its transports to Triton: KServe gRPC, and HTTP generate_stream.
FRONTENDS = ("frontend", "frontend-http")
TARGETS = ("triton", *FRONTENDS, "vllm")
MAX_MODEL_LEN = 1024


@dataclass
class RequestResult:
    ttft: float
    gaps: list[float]  # seconds between consecutive token-carrying events, per token
    tokens: int
    e2e: float = float("nan")  # from sending the request to its last byte

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first, as vLLM's benchmark defines it (its
        per-token inter-token latency): (E2E - TTFT) / (tokens - 1).  Unlike gaps between
        events, it does not read low or high when a server sends several tokens at once."""
        if self.tokens < 2 or self.ttft != self.ttft:  # no second token, or no TTFT (NaN)
            return None
        return (self.e2e - self.ttft) / (self.tokens - 1)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank, rounded), NaN for no values."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


@dataclass
class LevelResult:
    target: str
    concurrency: int
    requests: int
    seconds: float
    results: list[RequestResult] = field(default_factory=list)
    errors: int = 0
    cpu_seconds: float | None = None  # the frontend process's CPU time during the level
    client_cpu_seconds: float = 0.0  # this benchmark's own CPU time during the level

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.results) / self.seconds

    def row(self) -> dict:
        ttfts = [r.ttft for r in self.results if r.ttft == r.ttft]
        gaps = [g for r in self.results for g in r.gaps]
        tpots = [r.tpot for r in self.results if r.tpot is not None]
        e2es = [r.e2e for r in self.results]

        def ms(values, q, digits=2):
            return round(percentile(values, q) * 1e3, digits)
        return {"target": self.target, "concurrency": self.concurrency,
                "requests": self.requests, "errors": self.errors,
                "tokens_per_s": round(self.tokens_per_s, 1),
                "ttft_p50_ms": ms(ttfts, 50), "ttft_p99_ms": ms(ttfts, 99),
                "itl_p50_ms": ms(gaps, 50, 3), "itl_p99_ms": ms(gaps, 99, 3),
                "tpot_p50_ms": ms(tpots, 50, 3), "tpot_p99_ms": ms(tpots, 99, 3),
                "e2e_p50_ms": ms(e2es, 50), "e2e_p99_ms": ms(e2es, 99),
                "cpu_us_per_token": self.cpu_us_per_token,
                "client_cpu_us_per_token": round(
                    self.client_cpu_seconds / max(1, sum(r.tokens for r in self.results)) * 1e6, 1)}

    @property
    def cpu_us_per_token(self) -> float | None:
        tokens = sum(r.tokens for r in self.results)
        if self.cpu_seconds is None or not tokens:
            return None
        return round(self.cpu_seconds / tokens * 1e6, 1)


def _cpu_seconds(pid: int | None) -> float | None:
    """CPU time (user + system, all threads) that process `pid` has used so far."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    make: Callable  # (httpx client, prompt) -> awaitable RequestResult
    cpu_pid: int | None = None  # a frontend process whose CPU use per token is reported


# --- one streaming request per target ----------------------------------------------------

async def _sse(client: httpx.AsyncClient, url: str, body: dict, tokens_of) -> RequestResult:
    """Stream one request; tokens_of(event) -> (new tokens in the event, final count or None)."""
    start = time.perf_counter()
    ttft, last, gaps, counted, final = None, None, [], 0, None
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status_code}: {(await resp.aread())[:300]!r}")
        async for sse_event in aiter_events(resp):
            if sse_event.done:
                continue
            event = sse_event.json()
            if "error" in event:
                raise RuntimeError(f"{url}: {event['error']}")
            new, total = tokens_of(event)
            if total is not None:
                final = total
            if not new:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft = now - start
            else:
                gaps.extend([(now - last) / new] * new)
            last = now
            counted += new
    return RequestResult(ttft or float("nan"), gaps, final if final is not None else counted,
                         time.perf_counter() - start)


async def _whole(client: httpx.AsyncClient, url: str, body: dict) -> RequestResult:
    """One non-streaming OpenAI request: only its end-to-end latency and token count."""
    start = time.perf_counter()
    resp = await client.post(url, json=body)
    if resp.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {resp.status_code}: {resp.text[:300]!r}")
    tokens = resp.json()["usage"]["completion_tokens"]
    return RequestResult(float("nan"), [], tokens, time.perf_counter() - start)


def _openai_tokens(event):
    usage = event.get("usage")
    total = usage["completion_tokens"] if usage else None
    text = "".join(c.get("text", "") for c in event.get("choices", []))
    return (1 if text else 0), total


def _chat_tokens(event):
    usage = event.get("usage")
    total = usage["completion_tokens"] if usage else None
    text = "".join((c.get("delta") or {}).get("content") or "" for c in event.get("choices", []))
    return (1 if text else 0), total


def _triton_tokens(event):
    n = event.get("num_output_tokens")
    n = n[0] if isinstance(n, list) else n
    return int(n or 0), None


def _openai_request(base: str, model: str, tokens: int):
    def make(client, prompt):
        return _sse(client, f"{base}/v1/completions", {
            "model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}},
            _openai_tokens)
    return make


def _chat_request(base: str, model: str, tokens: int):
    def make(client, prompt):
        return _sse(client, f"{base}/v1/chat/completions", {
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}, _chat_tokens)
    return make


def _completions_whole_request(base: str, model: str, tokens: int):
    def make(client, prompt):
        return _whole(client, f"{base}/v1/completions", {
            "model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0,
            "ignore_eos": True})
    return make


def _triton_request(base: str, model: str, tokens: int):
    sampling = json.dumps({"max_tokens": tokens, "temperature": 0, "ignore_eos": True})

    def make(client, prompt):
        return _sse(client, f"{base}/v2/models/{model}/generate_stream", {
            "text_input": prompt, "stream": True, "sampling_parameters": sampling,
            "exclude_input_in_output": True, "return_num_output_tokens": True},
            _triton_tokens)
    return make


async def run_level(target: str, make, concurrency: int, requests: int,
                    cpu_pid: int | None = None) -> LevelResult:
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        # Warm-up at the level's own concurrency, not counted: every client's connection
        # opens, and the engine's batch reaches its size before the clock starts.
        await asyncio.gather(*(make(client, PROMPTS[i % len(PROMPTS)])
                               for i in range(concurrency)))
        queue = list(range(requests))
        level = LevelResult(target, concurrency, requests, 0.0)

        async def worker():
            while queue:
                i = queue.pop()
                try:
                    level.results.append(await make(client, PROMPTS[i % len(PROMPTS)]))
                except Exception as err:  # counted and shown, the run goes on
                    level.errors += 1
                    print(f"  {target} error: {err!r}", file=sys.stderr)

        start, cpu = time.perf_counter(), _cpu_seconds(cpu_pid)
        own = time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        level.seconds = time.perf_counter() - start
        level.client_cpu_seconds = time.process_time() - own
        if cpu is not None:
            level.cpu_seconds = _cpu_seconds(cpu_pid) - cpu
        return level


def measure_interleaved(targets: dict[str, Target], levels: list[int], per_level: int,
                        rounds: int) -> dict[tuple[str, int], list[LevelResult]]:
    """Every target at every level, `rounds` times, the targets taking turns within a
    round (in a rotating order): a machine that slows down for a while then slows all of
    them, and the ratios stay fair."""
    out: dict[tuple[str, int], list[LevelResult]] = {}
    names = list(targets)
    for c in levels:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                res = asyncio.run(run_level(name, targets[name].make, c, max(per_level, 8 * c),
                                            targets[name].cpu_pid))
                print(f"  round {r + 1} {name:13s} c={c:<3d} {res.tokens_per_s:8.0f} tok/s  "
                      f"ttft p50 {res.row()['ttft_p50_ms']} ms  "
                      f"itl p50 {res.row()['itl_p50_ms']} ms", file=sys.stderr, flush=True)
                out.setdefault((name, c), []).append(res)
    return out


# --- the servers ---------------------------------------------------------------------------

@dataclass
class RunningServer:
    http_url: str
    grpc_url: str


def engine_args(model_dir: Path) -> dict:
    """The engine settings of both servers: the Triton model's model.json, and vLLM's
    server flags (qa.common.image_servers.vllm_server_flags) made from the same dict."""
    return {**TEST_ENGINE_DEFAULTS, "model": str(model_dir), "max_model_len": MAX_MODEL_LEN,
            "seed": 0}


@contextmanager
def triton_server(model_dir: Path, args):
    if args.triton:
        # A server someone started (serving MODEL), e.g. to iterate on the frontend.
        http_url, grpc_url = args.triton.split(",")
        yield RunningServer(http_url, grpc_url)
        return
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "models"
        write_vllm_model(repo, MODEL, engine_args(model_dir))
        with TritonServer(repo, mounts=[model_dir]) as triton:
            yield triton


@contextmanager
def frontend_server(triton_url: str, model_dir: Path):
    with FrontendProcess(triton_url, "--tokenizer", str(model_dir), "--log-level",
                         "warning") as fe:
        yield fe.url, fe.proc.pid


@contextmanager
def vllm_server(model_dir: Path):
    """vLLM's own OpenAI server, with the engine settings the Triton model uses."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1")
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            *vllm_server_flags(engine_args(model_dir)), "--served-model-name", MODEL,
            "--host", "127.0.0.1", "--port", str(port), "--uvicorn-log-level", "warning"]
    # A process group of its own: stop() signals its engine processes too.
    with ServedProcess.host("vLLM's OpenAI server", argv, ports={"http": port}, env=env,
                            own_group=True) as server:
        server.wait_http("http", "/health", timeout=300, interval=0.5)
        yield server.url("http")


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


# Which target each ratio compares with which, per mode.
HOST_PAIRS = [(f, o) for f in FRONTENDS for o in ("triton", "vllm")]
IMAGE_PAIRS = [("openai-chat", "vllm-chat"), ("triton", "vllm-chat"),
               ("inprocess-chat", "vllm-chat"),
               ("openai-completions", "vllm-completions")]


def summarize(runs: dict[tuple[str, int], list[LevelResult]],
              pairs: list[tuple[str, str]] = HOST_PAIRS) -> dict:
    """Per target and level: the median round's tokens/s and the latencies of all rounds
    pooled; per level and pair: the ratio of tokens/s (and of TTFT p50), taken within
    each round (the median, and the lowest and highest)."""
    rows, ratios = [], []
    for (target, c), levels in runs.items():
        pooled = LevelResult(target, c, sum(lv.requests for lv in levels), 1.0,
                             [x for lv in levels for x in lv.results],
                             sum(lv.errors for lv in levels))
        if all(lv.cpu_seconds is not None for lv in levels):
            pooled.cpu_seconds = sum(lv.cpu_seconds for lv in levels)
        pooled.client_cpu_seconds = sum(lv.client_cpu_seconds for lv in levels)
        row = pooled.row()
        row["tokens_per_s"] = round(_median([lv.tokens_per_s for lv in levels]), 1)
        row["tokens_per_s_rounds"] = [round(lv.tokens_per_s, 1) for lv in levels]
        rows.append(row)
    for c in sorted({c for _, c in runs}):
        entry = {"concurrency": c}
        for a, b in pairs:
            if (a, c) not in runs or (b, c) not in runs:
                continue
            rounds = list(zip(runs[(a, c)], runs[(b, c)], strict=True))
            entry[f"{a}/{b}"] = _spread([x.tokens_per_s / y.tokens_per_s for x, y in rounds])
            ttft = [x.row()["ttft_p50_ms"] / y.row()["ttft_p50_ms"] for x, y in rounds]
            if all(v == v for v in ttft):  # streaming targets only (NaN otherwise)
                entry[f"{a}/{b} ttft"] = _spread(ttft)
        ratios.append(entry)
    return {"rows": rows, "ratios": ratios}


def _spread(per_round: list[float]) -> dict:
    return {"median": round(_median(per_round), 2), "min": round(min(per_round), 2),
            "max": round(max(per_round), 2)}


def table(summary: dict, targets=TARGETS, pairs=HOST_PAIRS) -> str:
    by = {(r["target"], r["concurrency"]): r for r in summary["rows"]}
    levels = sorted({c for _, c in by})
    lines = ["| target | conc | requests | tok/s (median) | TTFT p50 ms | TTFT p99 ms | "
             "TPOT p50 ms | TPOT p99 ms | ITL/event p50 ms | ITL/event p99 ms | "
             "E2E p50 ms | E2E p99 ms | frontend CPU us/token | client CPU us/token | errors |",
             "|---|" + "---|" * 14]
    for c in levels:
        for t in targets:
            if (t, c) in by:
                r = by[(t, c)]
                cpu = r.get("cpu_us_per_token")
                lines.append(
                    f"| {t} | {c} | {r['requests']} | {r['tokens_per_s']:.0f} | "
                    f"{r['ttft_p50_ms']} | {r['ttft_p99_ms']} | {r['tpot_p50_ms']} | "
                    f"{r['tpot_p99_ms']} | {r['itl_p50_ms']} | {r['itl_p99_ms']} | "
                    f"{r['e2e_p50_ms']} | {r['e2e_p99_ms']} | {'-' if cpu is None else cpu} | "
                    f"{r['client_cpu_us_per_token']} | {r['errors']} |")

    def ratio(entry, key):
        if key not in entry:
            return "-"
        v = entry[key]
        return f"{v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f})"

    keys = [f"{a}/{b}" for a, b in pairs if any(f"{a}/{b}" in e for e in summary["ratios"])]
    keys += [f"{k} ttft" for k in keys if any(f"{k} ttft" in e for e in summary["ratios"])]
    lines += ["", "| conc | " + " | ".join(
                  k.replace(" ttft", " TTFT p50") if k.endswith(" ttft") else f"{k} tok/s"
                  for k in keys) + " |",
              "|---|" + "---|" * len(keys)]
    for entry in summary["ratios"]:
        lines.append(f"| {entry['concurrency']} | "
                     + " | ".join(ratio(entry, k) for k in keys) + " |")
    lines.append("\nratios: median of the rounds (lowest-highest), each taken within one round")
    return "\n".join(lines)


# --- image mode: one container at a time -----------------------------------------------------

IMAGE_TARGETS = ("openai-chat", "triton", "inprocess-chat", "vllm-chat", "openai-completions",
                 "vllm-completions")
# Which container serves each image target, and how a request to it is made.
_IMAGE_REQUESTS = {
    "openai-chat": ("ours", "openai", _chat_request),
    "triton": ("ours", "triton", _triton_request),
    "inprocess-chat": ("inprocess", "openai", _chat_request),
    "openai-completions": ("ours", "openai", _completions_whole_request),
    "vllm-chat": ("vllm", "openai", _chat_request),
    "vllm-completions": ("vllm", "openai", _completions_whole_request),
}


def measure_containers(image: str, wanted: list[str], levels: list[int], per_level: int,
                       rounds: int, output_tokens: int, docker_args=()):
    """Each round starts each container in turn (the order rotating from round to round),
    times its start until ready, runs every level of its targets (taking turns) and
    removes it: one server at a time on the machine, as a user runs it."""
    from qa.common.image_servers import MODEL, image_model_json, run_container

    model_json = image_model_json(image)
    kinds = [k for k in ("ours", "inprocess", "vllm") if any(_IMAGE_REQUESTS[t][0] == k for t in wanted)]
    runs: dict[tuple[str, int], list[LevelResult]] = {}
    ready: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(rounds):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            with run_container(image, kind, model_json, docker_args=docker_args) as box:
                ready[kind].append(round(box.ready_s, 1))
                print(f"  round {r + 1} {kind}: ready {box.ready_s:.1f} s after docker run",
                      file=sys.stderr, flush=True)
                names = [t for t in wanted if _IMAGE_REQUESTS[t][0] == kind]
                targets = {t: Target(_IMAGE_REQUESTS[t][2](box.urls[_IMAGE_REQUESTS[t][1]],
                                                           MODEL, output_tokens))
                           for t in names}
                for c in levels:
                    for name in names[r % len(names):] + names[:r % len(names)]:
                        _run_and_report(runs, name, targets[name], c, per_level, r)
    return runs, {"model_json": model_json, "ready_s": ready}


def _run_and_report(runs, name: str, target: Target, c: int, per_level: int, r: int) -> None:
    res = asyncio.run(run_level(name, target.make, c, max(per_level, 8 * c), target.cpu_pid))
    row = res.row()
    print(f"  round {r + 1} {name:18s} c={c:<3d} {res.tokens_per_s:8.0f} tok/s  "
          f"{res.requests} requests  ttft p50 {row['ttft_p50_ms']} ms  "
          f"tpot p50 {row['tpot_p50_ms']} ms  client {row['client_cpu_us_per_token']} us/token  "
          f"errors {res.errors}", file=sys.stderr, flush=True)
    runs.setdefault((name, c), []).append(res)


def ready_table(ready: dict[str, list[float]]) -> str:
    lines = ["| container | start to ready s (median) | rounds |", "|---|---|---|"]
    for kind, times in ready.items():
        if times:
            lines.append(f"| {kind} | {_median(times):.1f} | {', '.join(map(str, times))} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="1,8,32,64")
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--requests", type=int, default=16,
                   help="requests per level (at least 8x concurrency: each client then runs "
                        "8 requests back to back, and the level measures the steady state "
                        "rather than the burst of its first requests)")
    p.add_argument("--targets", default=None,
                   help=f"host mode: {','.join(TARGETS)} (all by default); image mode: "
                        f"{','.join(IMAGE_TARGETS)} (default: openai-chat,triton,vllm-chat)")
    p.add_argument("--triton", default=None, metavar="HTTP_URL,GRPC_HOST:PORT",
                   help="use this running tritonserver (serving model `tiny`) instead of starting one")
    p.add_argument("--image", default=None,
                   help="measure containers of this image instead of servers on this host")
    p.add_argument("--docker-arg", action="append", default=[], metavar="ARG",
                   help="image mode: an extra `docker run` argument for every container")
    p.add_argument("--rounds", type=int, default=3,
                   help="times each target runs each level, taking turns")
    args = p.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    known = IMAGE_TARGETS if args.image else TARGETS
    default = "openai-chat,triton,vllm-chat" if args.image else ",".join(TARGETS)
    wanted = (args.targets or default).split(",")
    unknown = set(wanted) - set(known)
    if unknown:
        p.error(f"unknown target(s): {', '.join(sorted(unknown))}")
    extra = {}
    if args.image:
        runs, extra = measure_containers(args.image, wanted, levels, args.requests,
                                         args.rounds, args.output_tokens, args.docker_arg)
        summary = summarize(runs, IMAGE_PAIRS)
        print(table(summary, IMAGE_TARGETS, IMAGE_PAIRS))
        print()
        print(ready_table(extra["ready_s"]))
        extra["image"] = args.image
    else:
        summary = summarize(measure_host(args, wanted, levels))
        print(table(summary))
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench_openai-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"argv": sys.argv[1:] if argv is None else argv,
                                "output_tokens": args.output_tokens, "rounds": args.rounds,
                                "nproc": os.cpu_count(), **extra, **summary}, indent=2))
    print(f"\nwritten to {path}", file=sys.stderr)
    return 0


def measure_host(args, wanted: list[str], levels: list[int]):
    model_dir = tiny_model_path()
    targets = {}
    with ExitStack() as servers:
        # All servers run side by side, idle while another target is measured.
        if {"triton", *FRONTENDS} & set(wanted):
            triton = servers.enter_context(triton_server(model_dir, args))
            if "triton" in wanted:
                targets["triton"] = Target(
                    _triton_request(triton.http_url, MODEL, args.output_tokens))
            for name, triton_url in (("frontend", triton.grpc_url),
                                     ("frontend-http", triton.http_url)):
                if name in wanted:
                    url, pid = servers.enter_context(frontend_server(triton_url, model_dir))
                    targets[name] = Target(_openai_request(url, MODEL, args.output_tokens), pid)
        if "vllm" in wanted:
            url = servers.enter_context(vllm_server(model_dir))
            targets["vllm"] = Target(_openai_request(url, MODEL, args.output_tokens))
        return measure_interleaved(targets, levels, args.requests, args.rounds)


if __name__ == "__main__":
    sys.exit(main())

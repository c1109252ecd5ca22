#!/usr/bin/env python3
"""vLLM's own serving benchmark, `vllm bench serve`, against our image and vLLM's server.

    eval "$(scripts/setup_host.sh)"
    "$TVB_VENV/bin/python" bench/bench_serve.py --image tritonserver-vllm:24.10-cpu [--rounds 3]
        [--concurrency 1,16,64] [--num-prompts N] [--ours-env KEY=VALUE]
        [--vllm-arg ARG] [--client host|image] [--json PATH]

Both servers come from the one image, one container at a time (qa/common/image_servers.py
starts them, as bench_openai.py --image does), the order alternating from round to round:
  ours  the image's entrypoint: the OpenAI frontend (port 9000) in front of tritonserver
        and the vLLM backend, on the image's sample model (--ours-env: its environment,
        e.g. STREAM_INTERVAL_MAX=1)
  vllm  vLLM's own OpenAI server in a container of the same image, with the engine flags
        of the image's model.json (--vllm-arg: more of its flags, e.g.
        --vllm-arg="--stream-interval 13")
On each, for every concurrency C, the command vLLM's docs give for its chat endpoint:
  vllm bench serve --backend openai-chat --endpoint /v1/chat/completions
      --dataset-name random --random-input-len 32 --random-output-len 64 --ignore-eos
      --num-prompts N --max-concurrency C --num-warmups C --save-result ...
run by this environment's `vllm` (the tokenizer copied out of the image), or with
`--client image` by the container's own (`docker exec`; it then shares the server's CPU).
N is --num-prompts, default max(16, 4 C).  From each saved result: output tokens/s, TTFT
p50 and p99, TPOT p50, ITL p50 and p99.  The table gives, per concurrency and figure, each
server's median over the rounds (lowest-highest) and ours / vLLM's, taken within each
round (above 1 is better for tokens/s, worse for the latencies).  vLLM's ITL is the gap
between streamed chunks (a chunk of 13 tokens is one gap); TPOT is (latency - TTFT) /
(tokens - 1) per request.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "backends" / "vllm")]

from qa.common.docker import docker  # noqa: E402
from qa.common.image_servers import (  # noqa: E402
    MODEL,
    OPENAI_PORT,
    Container,
    add_vllm_arg_option,
    image_model_json,
    run_container,
    vllm_flags,
)

SERVERS = ("ours", "vllm")
INPUT_LEN, OUTPUT_LEN = 32, 64
# The figures read from vllm bench serve's result: (its key, the table's name, decimals).
FIGURES = (("output_throughput", "output tok/s", 0),
           ("median_ttft_ms", "TTFT p50 ms", 2), ("p99_ttft_ms", "TTFT p99 ms", 2),
           ("median_tpot_ms", "TPOT p50 ms", 2),
           ("median_itl_ms", "ITL p50 ms", 2), ("p99_itl_ms", "ITL p99 ms", 2))
RESULT_DIR_IN_IMAGE = "/tmp/bench-serve"


def num_prompts(concurrency: int, asked: int | None = None) -> int:
    return asked or max(16, 4 * concurrency)


def bench_args(*, base_url: str, tokenizer: str, concurrency: int, prompts: int,
               result_dir: str, result_file: str, input_len: int = INPUT_LEN) -> list[str]:
    """`vllm bench serve`'s arguments for one level (after the `vllm` command)."""
    return ["bench", "serve", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
            "--base-url", base_url, "--model", MODEL, "--tokenizer", tokenizer,
            "--dataset-name", "random", "--random-input-len", str(input_len),
            "--random-output-len", str(OUTPUT_LEN), "--ignore-eos",
            "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
            "--num-warmups", str(concurrency),
            "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99",
            "--disable-tqdm", "--save-result", "--result-dir", result_dir,
            "--result-filename", result_file]


def read_result(text: str) -> dict:
    """The figures of one `vllm bench serve --save-result` JSON, and its request counts."""
    data = json.loads(text)
    missing = [key for key, _, _ in FIGURES if key not in data]
    if missing:
        raise ValueError(f"vllm bench serve's result has no {', '.join(missing)} (were "
                         "--percentile-metrics ttft,tpot,itl --metric-percentiles 50,99 given?)")
    return {**{key: float(data[key]) for key, _, _ in FIGURES},
            "completed": int(data["completed"]), "failed": int(data.get("failed") or 0)}


# --- clients: where `vllm bench serve` runs ----------------------------------------------

def _run(argv: list[str], what: str) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed ({out.returncode}): {shlex.join(argv)}\n"
                           f"{(out.stdout + out.stderr)[-3000:]}")


class HostClient:
    """This environment's `vllm` (the one setup_host.sh makes), on the published port."""

    def __init__(self, vllm: str, tokenizer: str, input_len: int = INPUT_LEN):
        self.vllm, self.tokenizer, self.input_len = vllm, tokenizer, input_len

    def run(self, box: Container, concurrency: int, prompts: int) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            _run([self.vllm, *bench_args(base_url=box.urls["openai"], tokenizer=self.tokenizer,
                                         concurrency=concurrency, prompts=prompts,
                                         result_dir=tmp, result_file="result.json",
                                         input_len=self.input_len)],
                 "vllm bench serve")
            return read_result((Path(tmp) / "result.json").read_text())


class ImageClient:
    """The container's own `vllm`, by docker exec, on the server's port inside it."""

    def __init__(self, tokenizer: str, input_len: int = INPUT_LEN):
        self.tokenizer, self.input_len = tokenizer, input_len

    def run(self, box: Container, concurrency: int, prompts: int) -> dict:
        name = f"c{concurrency}.json"
        docker("exec", box.id, "vllm",
               *bench_args(base_url=f"http://127.0.0.1:{OPENAI_PORT}", tokenizer=self.tokenizer,
                           concurrency=concurrency, prompts=prompts,
                           result_dir=RESULT_DIR_IN_IMAGE, result_file=name,
                           input_len=self.input_len), timeout=3600)
        return read_result(docker("exec", box.id, "cat", f"{RESULT_DIR_IN_IMAGE}/{name}").stdout)


@contextmanager
def tokenizer_from(image: str, path: str):
    """The model folder PATH of IMAGE, copied to this host (the servers' own tokenizer)."""
    with tempfile.TemporaryDirectory() as tmp:
        cid = docker("create", image).stdout.strip()
        try:
            docker("cp", f"{cid}:{path}", f"{tmp}/model", timeout=300)
        finally:
            docker("rm", "-f", cid, check=False)
        yield f"{tmp}/model"


# --- the rounds --------------------------------------------------------------------------

def server_order(round_index: int) -> tuple[str, ...]:
    return SERVERS if round_index % 2 == 0 else SERVERS[::-1]


def measure(args, client, levels: list[int], model_json: dict) -> list[dict]:
    runs = []
    for r in range(args.rounds):
        for server in server_order(r):
            ours = server == "ours"
            env = [a for kv in args.ours_env for a in ("-e", kv)] if ours else []
            flags = [] if ours else vllm_flags(args.vllm_arg)
            with run_container(args.image, server, model_json, docker_args=env,
                               vllm_args=flags) as box:
                _say(f"round {r + 1} {server}: ready {box.ready_s:.1f} s after docker run")
                for c in levels:
                    figures = client.run(box, c, num_prompts(c, args.num_prompts))
                    runs.append({"round": r + 1, "server": server, "concurrency": c,
                                 "ready_s": round(box.ready_s, 1), **figures})
                    _say(f"round {r + 1} {server} c={c}: " + ", ".join(
                        f"{name} {figures[key]:.{d}f}" for key, name, d in FIGURES)
                        + f", failed {figures['failed']}")
    return runs


def _say(text: str) -> None:
    print(f"  {text}", file=sys.stderr, flush=True)


# --- the report --------------------------------------------------------------------------

def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: list[dict]) -> list[dict]:
    """Per concurrency and figure: each server's spread over the rounds, and the spread of
    ours / vLLM's, each ratio taken within one round."""
    rows = []
    for c in sorted({run["concurrency"] for run in runs}):
        by = {(run["server"], run["round"]): run for run in runs if run["concurrency"] == c}
        rounds = sorted({r for s, r in by if s == "ours"} & {r for s, r in by if s == "vllm"})
        for key, _, _ in FIGURES:
            row = {"concurrency": c, "figure": key}
            for server in SERVERS:
                values = [run[key] for (s, _), run in by.items() if s == server]
                row[server] = spread(values) if values else None
            ratios = [by["ours", r][key] / by["vllm", r][key] for r in rounds
                      if by["vllm", r][key]]
            row["ratio"] = spread(ratios) if ratios else None
            rows.append(row)
        rows.append({"concurrency": c, "figure": "failed",
                     **{s: sum(run["failed"] for (s2, _), run in by.items() if s2 == s)
                        for s in SERVERS}})
    return rows


def _cell(value: dict | None, digits: int) -> str:
    if value is None:
        return "-"
    return (f"{value['median']:.{digits}f} "
            f"({value['min']:.{digits}f}-{value['max']:.{digits}f})")


def table(rows: list[dict]) -> str:
    names = {key: (name, d) for key, name, d in FIGURES}
    lines = ["| conc | figure | ours | vLLM | ours / vLLM |", "|---|---|---|---|---|"]
    for row in rows:
        if row["figure"] == "failed":
            lines.append(f"| {row['concurrency']} | failed requests | {row['ours']} | "
                         f"{row['vllm']} | |")
            continue
        name, d = names[row["figure"]]
        lines.append(f"| {row['concurrency']} | {name} | {_cell(row['ours'], d)} | "
                     f"{_cell(row['vllm'], d)} | {_cell(row['ratio'], 2)} |")
    return "\n".join(lines)


def ready_line(runs: list[dict]) -> str:
    ready = {s: [run["ready_s"] for run in runs if run["server"] == s] for s in SERVERS}
    return "start to ready (median): " + ", ".join(
        f"{s} {statistics.median(v):.1f} s" for s, v in ready.items() if v)


# --- main --------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image", required=True, help="the image both servers run from")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", default="1,16,64",
                   help="--max-concurrency levels, comma-separated (default %(default)s)")
    p.add_argument("--input-len", type=int, default=INPUT_LEN, metavar="TOKENS",
                   help="random prompts' length (default %(default)s; longer prompts make "
                        "the engine the slower part)")
    p.add_argument("--num-prompts", type=int, default=None,
                   help="requests per level (default max(16, 4 x concurrency))")
    p.add_argument("--ours-env", action="append", default=[], metavar="KEY=VALUE",
                   help="environment of our container (repeatable)")
    add_vllm_arg_option(p)
    p.add_argument("--client", choices=("host", "image"), default="host",
                   help="where vllm bench serve runs: this environment (default) or the "
                        "container, by docker exec")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="write every round's figures and the summary here")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    if bad := [kv for kv in args.ours_env if "=" not in kv]:
        p.error(f"--ours-env {bad[0]!r}: expected KEY=VALUE")
    model_json = image_model_json(args.image)
    tokenizer = str(model_json.get("tokenizer") or model_json["model"])
    if args.client == "image":
        runs = measure(args, ImageClient(tokenizer, args.input_len), levels, model_json)
    else:
        vllm = Path(sys.executable).parent / "vllm"
        if not vllm.is_file():
            p.error(f"no {vllm}: run with setup_host.sh's Python, or --client image")
        with tokenizer_from(args.image, tokenizer) as local:
            runs = measure(args, HostClient(str(vllm), local, args.input_len), levels, model_json)
    rows = summarize(runs)
    print(table(rows))
    print(f"\n{ready_line(runs)}; medians over {args.rounds} round(s) (lowest-highest), "
          "ratios taken within each round")
    if args.json:
        args.json.write_text(json.dumps({
            "argv": sys.argv[1:] if argv is None else argv, "image": args.image,
            "client": args.client, "rounds": args.rounds, "concurrency": levels,
            "nproc": os.cpu_count(), "model_json": model_json, "runs": runs,
            "summary": rows}, indent=2))
        print(f"written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

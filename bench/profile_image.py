#!/usr/bin/env python3
"""Where the CPU goes per streamed token, process by process, in containers of an image.

    eval "$(scripts/setup_host.sh)"
    python bench/profile_image.py --image tritonserver-vllm:24.10-cpu [--concurrency 16]
        [--output-tokens 64] [--rounds 3] [--py-spy PATH/TO/py-spy]
        [--before-image tritonserver-vllm:OLDER]

Each round starts each server in turn (our entrypoint: frontend + tritonserver + the vLLM
backend's stub; then vLLM's own OpenAI server from the same image; the order alternates
from round to round), one container at a time.  On each it runs one load level (streaming
chat, and Triton's generate_stream on ours; every request asks for exactly
--output-tokens tokens) and reads each process's CPU time (user + system, all threads,
from /proc on this host) before and after: CPU microseconds per output token, per
process, next to the level's tokens/s, TTFT p50 and TPOT p50 (vLLM's per-token
inter-token latency).  The serving side is the stub, tritonserver and the frontend for
ours, vLLM's API server for vLLM; the engine core and its worker are listed but not
counted (the model's compute, the same code in both).  The report gives the median of the
rounds (lowest-highest) and each figure's ratio to vLLM's server, taken within a round.
With --before-image, each round also runs our entrypoint from that image (targets named
`before-...`): a change's before and after, side by side with vLLM's server in one run.

With --py-spy, it also samples the Python processes during a second run of the level in
the first round (py-spy record, non-blocking, Python frames only, from this host: run as
root) and prints, per process, the share of samples under the functions that matter for
the per-token path; the raw stacks go to bench/results/profile-TIMESTAMP/ (open them with
speedscope or flamegraph.pl), with profile.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_openai as bench  # noqa: E402

from qa.common.docker import docker  # noqa: E402
from qa.common.image_servers import (  # noqa: E402
    MODEL,
    Container,
    add_vllm_arg_option,
    image_model_json,
    run_container,
    start_container,
    vllm_flags,
    wait_ready,
)

# What each process of a container is, from its command line.
ROLES = [("VLLM::EngineCore", "engine core (vLLM)"),
         ("VLLM::", "vLLM worker"),
         ("triton_python_backend_stub", "backend stub (model.py)"),
         # Before tritonserver: with Triton in its process, the frontend's command line
         # names the repository in /opt/tritonserver.
         ("triton-openai", "frontend (triton-openai)"),
         ("tritonserver", "tritonserver"),
         ("vllm.entrypoints.openai.api_server", "vLLM API server")]

# Frames whose inclusive share of a process's samples the report gives, by process.
FRAMES = {
    "backend stub (model.py)": [
        "_generate (model.py)", "_send (model.py)", "generate_outputs (outputs.py)",
        "_poll_cancelled (model.py)", "output_handler (vllm/v1/engine/async_llm.py)",
        "process_outputs (vllm/v1/engine/output_processor.py)", "get_output_async",
        "run_forever", "_run_once"],
    "frontend (triton-openai)": ["chat_events", "stream_infer", "data_received",
                                 "run_asgi", "send (starlette", "_run_once"],
    "vLLM API server": ["chat_completion_stream_generator", "output_handler",
                        "process_outputs", "_run_once"],
}


# The processes that serve a token (engine core and workers are the model's compute, the
# same in both servers, and are reported apart).
SERVING = ["backend stub (model.py)", "tritonserver", "frontend (triton-openai)",
           "vLLM API server"]
ENGINE = ["engine core (vLLM)", "vLLM worker"]
# What each container is measured with: (container, target, port, request maker).
PLAN = [("ours", "openai-chat", "openai", bench._chat_request),
        ("ours", "triton", "triton", bench._triton_request),
        ("inprocess", "inprocess-chat", "openai", bench._chat_request),
        ("vllm", "vllm-chat", "openai", bench._chat_request)]


def role_of(args: str) -> str | None:
    for needle, role in ROLES:
        if needle in args:
            return role
    return None


def container_processes(container_id: str) -> dict[int, str]:
    """Host PID -> role, for the processes of a container that the report names."""
    table = docker("top", container_id, "-eo", "pid,args").stdout
    found = {}
    for line in table.splitlines()[1:]:
        pid, _, args = line.strip().partition(" ")
        role = role_of(args)
        if role is not None:
            found[int(pid)] = role
    # Docker's userland proxy, on this host, carries the published ports' traffic.
    ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                container_id, check=False).stdout.strip()
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    for line in ps.splitlines()[1:]:
        pid, _, args = line.strip().partition(" ")
        if ip and "docker-proxy" in args and f"-container-ip {ip} " in args:
            found[int(pid)] = "docker-proxy"
    return found


def cpu_seconds(pids) -> dict[int, float]:
    return {pid: bench._cpu_seconds(pid) for pid in pids}


def thread_seconds(pid: int) -> dict[str, float]:
    """CPU seconds per thread name of process `pid` (threads of one name summed)."""
    found = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a thread that ended meanwhile
        found[name] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def profile_level(name: str, make, concurrency: int, requests: int, pids: dict[int, str]):
    before = cpu_seconds(pids)
    threads_before = {pid: thread_seconds(pid) for pid in pids}
    level = asyncio.run(bench.run_level(name, make, concurrency, requests))
    after = cpu_seconds(pids)
    tokens = sum(r.tokens for r in level.results)
    per_role, per_thread = Counter(), {}
    for pid, role in pids.items():
        per_role[role] += (after[pid] - before[pid]) / tokens * 1e6
        now = thread_seconds(pid)
        busy = {t: round((now[t] - threads_before[pid].get(t, 0.0)) / tokens * 1e6, 1)
                for t in now}
        per_thread[role] = dict(sorted(((t, us) for t, us in busy.items() if us >= 1.0),
                                       key=lambda x: -x[1]))
    return level, {role: round(us, 1) for role, us in per_role.items()}, per_thread


def serving_figures(us: dict[str, float]) -> dict[str, float]:
    """The serving side of a run's CPU per token: every serving process together, and the
    busiest one (the one that caps an instance).  The engine's processes and Docker's
    proxy are left out: the model's compute, and the host's, the same for both servers."""
    serving = {r: v for r, v in us.items() if r in SERVING}
    busiest = max(serving, key=serving.get, default=None)
    return {"serving_us": round(sum(serving.values()), 1),
            "busiest": busiest, "busiest_us": serving.get(busiest, 0.0)}


def py_spy(py_spy_bin: str, pid: int, seconds: int, out: Path) -> subprocess.Popen:
    return subprocess.Popen([py_spy_bin, "record", "--pid", str(pid), "--duration",
                             str(seconds), "--rate", "250", "--nonblocking", "--format", "raw",
                             "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def frame_shares(raw: Path, frames: list[str]) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """From py-spy's collapsed stacks: the share of samples with each frame on the stack,
    and the functions most often on top (self time)."""
    total, inclusive, top = 0, Counter(), Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        names = stack.split(";")
        for frame in frames:
            if any(frame in name for name in names):
                inclusive[frame] += n
        top[names[-1]] += n
    if not total:
        return {}, []
    return ({f: round(100 * inclusive[f] / total, 1) for f in frames},
            [(f, round(100 * n / total, 1)) for f, n in top.most_common(12)])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image", required=True)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--requests", type=int, default=0, help="per run (default 8x concurrency)")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds; each starts every server in turn, the order alternating")
    p.add_argument("--py-spy", default=None, metavar="PATH",
                   help="sample with this py-spy too (in the first round)")
    p.add_argument("--seconds", type=int, default=20, help="py-spy's sampling time")
    p.add_argument("--docker-arg", action="append", default=[], metavar="ARG",
                   help="an extra `docker run` argument (--docker-arg=-v --docker-arg=SRC:DST)")
    p.add_argument("--ours-docker-arg", action="append", default=[], metavar="ARG",
                   help="an extra `docker run` argument for our container only")
    add_vllm_arg_option(p)
    p.add_argument("--servers", default="ours,vllm",
                   help="which containers: ours, inprocess (the frontend with Triton in "
                        "its process), vllm (and before, with --before-image)")
    p.add_argument("--together", action="store_true",
                   help="start every container once, together, and keep them up: the "
                        "rounds then alternate loads, not starts (more rounds a minute)")
    p.add_argument("--before-image", default=None, metavar="IMAGE",
                   help="also run our server from this image in each round (targets "
                        "before-openai-chat, before-triton): a change's before and after")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    requests = args.requests or 8 * args.concurrency
    out_dir = bench.REPO / "bench" / "results" / f"profile-{time.strftime('%Y%m%d-%H%M%S')}"
    out_dir.mkdir(parents=True, exist_ok=True)
    model_json = image_model_json(args.image)
    report = {"image": args.image, "concurrency": args.concurrency,
              "output_tokens": args.output_tokens, "requests": requests,
              "rounds": args.rounds, "nproc": os.cpu_count(), "runs": []}
    kinds = args.servers.split(",")
    if args.before_image and "before" not in kinds:
        kinds.append("before")
    with contextlib.ExitStack() as stack:
        boxes = {}
        if args.together:
            boxes = start_all(stack, args, kinds, model_json)
        for r in range(args.rounds):
            for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                with contextlib.ExitStack() as this_round:
                    box = boxes.get(kind) or this_round.enter_context(
                        run_container(*container_of(args, kind), model_json,
                                      docker_args=docker_args_of(args, kind),
                                      vllm_args=vllm_args_of(args, kind)))
                    report["runs"] += profile_server(args, kind, box, r, requests, out_dir)
    report["summary"] = summarize(report["runs"])
    (out_dir / "profile.json").write_text(json.dumps(report, indent=2))
    print(cpu_table(report))
    print(f"\nwritten to {out_dir}", file=sys.stderr)
    return 0


def container_of(args, kind: str) -> tuple[str, str]:
    """(image, server kind) of a container of the run."""
    return (args.before_image, "ours") if kind == "before" else (args.image, kind)


def docker_args_of(args, kind: str) -> list[str]:
    return args.docker_arg + (args.ours_docker_arg if kind != "vllm" else [])


def vllm_args_of(args, kind: str) -> list[str]:
    return vllm_flags(args.vllm_arg) if kind == "vllm" else []


def start_all(stack: contextlib.ExitStack, args, kinds: list[str], model_json: dict) -> dict:
    """Every container of the run, started together and kept up until the end."""
    started = {}
    for kind in kinds:
        image, server = container_of(args, kind)
        box, checks = start_container(image, server, model_json,
                                      docker_args=docker_args_of(args, kind),
                                      vllm_args=vllm_args_of(args, kind))
        stack.callback(box.stop, timeout=0)
        started[kind] = (box, checks)
    boxes = {}
    for kind, (box, checks) in started.items():
        ready_s = wait_ready(box, checks, timeout=600)
        boxes[kind] = Container(box.cid, {name: box.url(name) for name in checks}, ready_s)
    return boxes


def profile_server(args, kind: str, box, r: int, requests: int, out_dir: Path) -> list[dict]:
    """One round's load levels on one container, with its processes' CPU time."""
    runs = []
    pids = container_processes(box.id)
    server = container_of(args, kind)[1]
    for _, target, port, request in [x for x in PLAN if x[0] == server]:
        name = f"before-{target}" if kind == "before" else target
        make = request(box.urls[port], MODEL, args.output_tokens)
        level, us, threads = profile_level(name, make, args.concurrency, requests, pids)
        row = level.row()
        run = {"round": r + 1, "target": name,
               "tokens_per_s": round(level.tokens_per_s, 1),
               "ttft_p50_ms": row["ttft_p50_ms"], "tpot_p50_ms": row["tpot_p50_ms"],
               "itl_p50_ms": row["itl_p50_ms"], "errors": level.errors,
               "cpu_us_per_token": us, **serving_figures(us),
               "threads_us_per_token": threads}
        if args.py_spy and r == 0:
            run["py_spy"] = sample(args, name, make, requests, pids, out_dir)
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if k != "threads_us_per_token"}),
              file=sys.stderr, flush=True)
    return runs


def sample(args, name, make, requests, pids, out_dir: Path) -> dict:
    """Runs the level again (long enough for --seconds) with py-spy on each Python process."""
    spies = {}
    for pid, role in pids.items():
        if role in FRAMES:
            raw = out_dir / f"{name}-{role.split()[0]}-{pid}.txt"
            spies[role] = (raw, py_spy(args.py_spy, pid, args.seconds, raw))
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        asyncio.run(bench.run_level(name, make, args.concurrency, requests))
    found = {}
    for role, (raw, proc) in spies.items():
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0 or not raw.exists():
            found[role] = {"error": err.decode(errors="replace")[-500:]}
            continue
        inclusive, top = frame_shares(raw, FRAMES[role])
        found[role] = {"inclusive_pct": inclusive, "self_pct_top": top, "raw": raw.name}
    return found


# The figures compared with vLLM's server, as (name, what of a run).
_FIGURES = [("serving CPU/token", "serving_us"), ("busiest process CPU/token", "busiest_us"),
            ("tok/s", "tokens_per_s"), ("TTFT p50", "ttft_p50_ms"),
            ("TPOT p50", "tpot_p50_ms")]


def _spread(values: list[float]) -> dict | None:
    values = [v for v in values if v == v]  # NaN: a figure a run did not have
    if not values:
        return None
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def summarize(runs: list[dict], reference: str = "vllm-chat") -> dict:
    """Per target: the median (lowest, highest) of each figure over the rounds, per process
    too; and each figure's ratio to vLLM's server, taken within each round (the rounds
    alternate, so a host that slows down for a while slows both)."""
    targets = list(dict.fromkeys(run["target"] for run in runs))
    by_round = {(run["target"], run["round"]): run for run in runs}
    rounds = sorted({run["round"] for run in runs})
    out = {}
    for target in targets:
        mine = [run for run in runs if run["target"] == target]
        roles = list(dict.fromkeys(role for run in mine for role in run["cpu_us_per_token"]))
        entry = {"figures": {key: _spread([float(run[key]) for run in mine])
                             for _, key in _FIGURES},
                 "processes": {role: _spread([run["cpu_us_per_token"].get(role, float("nan"))
                                              for run in mine]) for role in roles},
                 "busiest": Counter(run["busiest"] for run in mine).most_common(1)[0][0]}
        if target != reference:
            pairs = [(by_round[(target, r)], by_round[(reference, r)]) for r in rounds
                     if (target, r) in by_round and (reference, r) in by_round]
            entry["vs_" + reference] = {
                key: _spread([a[key] / b[key] if b[key] else float("nan") for a, b in pairs])
                for _, key in _FIGURES}
        out[target] = entry
    return out


def _fmt(spread: dict | None, digits: int = 0) -> str:
    if spread is None:
        return "-"
    return (f"{spread['median']:.{digits}f} ({spread['min']:.{digits}f}-"
            f"{spread['max']:.{digits}f})")


def cpu_table(report: dict) -> str:
    summary = report["summary"]
    roles = [r for r in SERVING + ENGINE + ["docker-proxy"]
             if any(r in s["processes"] for s in summary.values())]
    lines = ["| per output token | " + " | ".join(summary) + " |",
             "|---|" + "---|" * len(summary)]
    for role in roles:
        lines.append(f"| {role}{'' if role in SERVING else ' (not counted)'} | "
                     + " | ".join(_fmt(s["processes"].get(role)) for s in summary.values())
                     + " |")
    for label, key in _FIGURES:
        digits = 1 if key.endswith("_ms") else 0
        lines.append(f"| {label} | " + " | ".join(_fmt(s["figures"][key], digits)
                                                   for s in summary.values()) + " |")
    lines.append("\nCPU microseconds per output token (median of the rounds, lowest-highest), "
                 f"c={report['concurrency']}, {report['output_tokens']} tokens per request, "
                 f"{report['rounds']} rounds, {report['nproc']} CPUs; serving = "
                 + " + ".join(SERVING))
    ratios = [(t, s) for t, s in summary.items() if "vs_vllm-chat" in s]
    if ratios:
        lines += ["", "| ratio to vLLM's server, within each round | " + " | ".join(
                      t for t, _ in ratios) + " |", "|---|" + "---|" * len(ratios)]
        for label, key in _FIGURES:
            lines.append(f"| {label} | " + " | ".join(_fmt(s["vs_vllm-chat"][key], 2)
                                                       for _, s in ratios) + " |")
        lines.append("\nbusiest serving process: " + ", ".join(
            f"{t}: {s['busiest']}" for t, s in ratios))
    lines.append("\nbusiest threads, first round (us per token):")
    for run in report["runs"]:
        if run["round"] != 1:
            continue
        for role, threads in run["threads_us_per_token"].items():
            top = ", ".join(f"{t} {us}" for t, us in list(threads.items())[:6])
            lines.append(f"  {run['target']}: {role}: {top}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

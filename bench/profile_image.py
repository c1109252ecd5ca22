#!/usr/bin/env python3
"""Where the CPU goes per streamed token, process by process, in containers of an image.

    eval "$(scripts/setup_host.sh)"
    python bench/profile_image.py --image tritonserver-vllm:24.10-cpu [--concurrency 32]
        [--py-spy PATH/TO/py-spy]

For each server (our entrypoint: frontend + tritonserver + the vLLM backend's stub; and
vLLM's own OpenAI server from the same image) it starts a container, warms it up, runs
one load level (streaming chat, and Triton's generate_stream on ours) and reads each
process's CPU time (user + system, all threads, from /proc on this host) before and
after: CPU microseconds per output token, per process.  With --py-spy, it also samples
the Python processes during a second run of the level (py-spy record, non-blocking,
Python frames only, from this host: run as root) and prints, per process, the share
of samples under the functions that matter for the per-token path; the raw stacks go
to bench/results/profile-TIMESTAMP/ (open them with speedscope or flamegraph.pl).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_openai as bench  # noqa: E402
from image_servers import MODEL, image_model_json, run_container  # noqa: E402

from tritonbuild.hostenv import docker_binary  # noqa: E402

# What each process of a container is, from its command line.
ROLES = [("VLLM::EngineCore", "engine core (vLLM)"),
         ("VLLM::", "vLLM worker"),
         ("triton_python_backend_stub", "backend stub (model.py)"),
         ("tritonserver", "tritonserver"),
         ("triton-openai", "frontend (triton-openai)"),
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


def role_of(args: str) -> str | None:
    for needle, role in ROLES:
        if needle in args:
            return role
    return None


def container_processes(container_id: str) -> dict[int, str]:
    """Host PID -> role, for the processes of a container that the report names."""
    out = subprocess.run([docker_binary(), "top", container_id, "-eo", "pid,args"],
                         capture_output=True, text=True, check=True)
    found = {}
    for line in out.stdout.splitlines()[1:]:
        pid, _, args = line.strip().partition(" ")
        role = role_of(args)
        if role is not None:
            found[int(pid)] = role
    # Docker's userland proxy, on this host, carries the published ports' traffic.
    ip = subprocess.run([docker_binary(), "inspect", "-f",
                         "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container_id],
                        capture_output=True, text=True).stdout.strip()
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image", required=True)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--requests", type=int, default=0, help="per run (default 8x concurrency)")
    p.add_argument("--py-spy", default=None, metavar="PATH", help="sample with this py-spy too")
    p.add_argument("--seconds", type=int, default=20, help="py-spy's sampling time")
    p.add_argument("--docker-arg", action="append", default=[], metavar="ARG",
                   help="an extra `docker run` argument (--docker-arg=-v --docker-arg=SRC:DST)")
    p.add_argument("--servers", default="ours,vllm", help="which containers: ours, vllm")
    args = p.parse_args(argv)
    requests = args.requests or 8 * args.concurrency
    out_dir = bench.REPO / "bench" / "results" / f"profile-{time.strftime('%Y%m%d-%H%M%S')}"
    out_dir.mkdir(parents=True, exist_ok=True)
    model_json = image_model_json(args.image)
    report = {"image": args.image, "concurrency": args.concurrency,
              "output_tokens": args.output_tokens, "requests": requests, "runs": []}
    plan = [("ours", "openai-chat", "openai", bench._chat_request),
            ("ours", "triton", "triton", bench._triton_request),
            ("vllm", "vllm-chat", "openai", bench._chat_request)]
    for kind in args.servers.split(","):
        with run_container(args.image, kind, model_json, docker_args=args.docker_arg) as box:
            pids = container_processes(box.id)
            for _, name, port, request in [x for x in plan if x[0] == kind]:
                make = request(box.urls[port], MODEL, args.output_tokens)
                level, us, threads = profile_level(name, make, args.concurrency, requests, pids)
                run = {"target": name, "tokens_per_s": round(level.tokens_per_s, 1),
                       "errors": level.errors, "cpu_us_per_token": us,
                       "threads_us_per_token": threads}
                if args.py_spy:
                    run["py_spy"] = sample(args, name, make, requests, pids, out_dir)
                report["runs"].append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)
    (out_dir / "profile.json").write_text(json.dumps(report, indent=2))
    print(cpu_table(report))
    print(f"\nwritten to {out_dir}", file=sys.stderr)
    return 0


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


def cpu_table(report: dict) -> str:
    roles = [r for _, r in ROLES] + ["docker-proxy"]
    lines = ["| target | tok/s | " + " | ".join(roles) + " | all |",
             "|---|---|" + "---|" * (len(roles) + 1)]
    for run in report["runs"]:
        us = run["cpu_us_per_token"]
        lines.append(f"| {run['target']} | {run['tokens_per_s']:.0f} | "
                     + " | ".join(str(us.get(r, "-")) for r in roles)
                     + f" | {sum(us.values()):.1f} |")
    lines.append(f"\nCPU microseconds per output token, c={report['concurrency']}, "
                 f"{report['output_tokens']} tokens per request, {os.cpu_count()} CPUs")
    lines.append("\nbusiest threads (us per token):")
    for run in report["runs"]:
        for role, threads in run["threads_us_per_token"].items():
            top = ", ".join(f"{t} {us}" for t, us in list(threads.items())[:6])
            lines.append(f"  {run['target']}: {role}: {top}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

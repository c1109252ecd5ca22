#!/usr/bin/env python3
"""Benchmark the image build: cold build time, rebuild time after a change under
backends/vllm/, and the image size, each printed as a row of one table.

    python bench/bench_build.py [--skip-cold] [--tag NAME:TAG] [-- BUILD.PY FLAGS...]

"Cold" is `--no-cache`: every layer is built again, while BuildKit's cache mounts
(pip and apt downloads) stay warm, as on any machine that has built once.  The rebuild
edits the staged copy of backends/vllm/model.py in the build context (the checkout is
never modified), runs the build again, and reports which steps really ran.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The repository (qa, tritonbuild) and the backend folder, as pytest's `pythonpath` has them.
sys.path[:0] = [str(REPO), str(REPO / "backends" / "vllm")]

from qa.common.build_py import run_build_py  # noqa: E402
from qa.common.docker import docker  # noqa: E402


def build(flags: list[str], build_dir: Path) -> tuple[float, str]:
    """Seconds `./build.py FLAGS` took, and what it printed."""
    start = time.monotonic()
    out = run_build_py(*flags, build_dir=build_dir, timeout=None)
    elapsed = time.monotonic() - start
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise SystemExit(f"build failed ({out.returncode}): {' '.join(out.args)}")
    return elapsed, out.stdout + out.stderr


def steps_run(log: str) -> list[str]:
    """Build steps that ran (not CACHED), from BuildKit's plain progress output."""
    titles: dict[str, str] = {}
    cached: set[str] = set()
    for line in log.splitlines():
        m = re.match(r"^(#\d+) \[([^\]]+)\] (.*)$", line)
        if m:
            titles[m.group(1)] = f"[{m.group(2)}] {m.group(3)[:60]}"
        m = re.match(r"^(#\d+) CACHED$", line)
        if m:
            cached.add(m.group(1))
    # FROM lines only resolve the base image; "internal" lines load the Dockerfile.
    return [t for k, t in titles.items()
            if k not in cached and "internal" not in t and "] FROM " not in t]


def row(metric: str, value: str, note: str = "") -> None:
    print(f"| {metric:<34} | {value:>10} | {note}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-cold", action="store_true", help="skip the --no-cache build")
    ap.add_argument("--tag", default="tritonserver-vllm:bench")
    ap.add_argument("flags", nargs="*", help="build.py flags (default: --backend=vllm "
                    "--endpoint=openai)")
    args = ap.parse_args()
    flags = args.flags or ["--backend=vllm", "--endpoint=openai"]
    build_dir = Path(tempfile.mkdtemp(prefix="tvb-bench-"))
    base = [*flags, f"--tag={args.tag}", "-v"]

    print(f"| {'metric':<34} | {'value':>10} | note")
    print(f"|{'-' * 36}|{'-' * 12}|------")
    # A warm build first, so that the rebuild below starts from a complete cache.
    warm, _ = build(base, build_dir)
    if not args.skip_cold:
        cold, log = build(base + ["--no-cache"], build_dir)
        row("cold build (--no-cache)", f"{cold:.1f} s",
            f"{len(steps_run(log))} steps ran; pip/apt cache mounts warm")
    else:
        row("warm build (all layers cached)", f"{warm:.1f} s", "")

    # Write build.sh and the context again without --no-cache (a dry run builds nothing),
    # change the staged vLLM backend the way an edit would, and run build.sh as is.
    build(base + ["--dryrun"], build_dir)
    model = build_dir / "context" / "backends" / "vllm" / "model.py"
    model.write_text(model.read_text() + f"\n# bench edit {time.time()}\n")
    start = time.monotonic()
    out = subprocess.run(["sh", str(build_dir / "build.sh")], capture_output=True, text=True,
                         env={**os.environ})
    rebuild = time.monotonic() - start
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-4000:])
        raise SystemExit("rebuild failed")
    ran = steps_run(out.stdout + out.stderr)
    row("rebuild after backends/vllm edit", f"{rebuild:.1f} s",
        f"{len(ran)} steps ran: " + "; ".join(ran))

    size = json.loads(docker("image", "inspect", "--format", "{{json .Size}}", args.tag).stdout)
    row("image size", f"{size / 1e9:.2f} GB", args.tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

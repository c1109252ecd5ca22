#!/usr/bin/env python3
"""Resolve the GPU image's lock for each NGC release with a vLLM pairing.

    scripts/lock_gpu.py [RELEASE ...]          write requirements/gpu/<release>.txt
    scripts/lock_gpu.py --check [RELEASE ...]  resolve again, exit 1 if a lock differs

Uses `uv pip compile` (pinned in requirements/host-test.txt) against the real index for
the release's Python and manylinux x86_64: metadata only, seconds, no GPU and no CUDA.
The index is uv's default (PyPI) unless UV_INDEX_URL says otherwise.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonbuild import lock, pins  # noqa: E402


def uv() -> str:
    here = Path(sys.executable).with_name("uv")
    found = str(here) if here.exists() else shutil.which("uv")
    if not found:
        sys.exit("lock_gpu.py: uv not found (pip install the version in requirements/host-test.txt)")
    return found


def resolve(release: str, out: Path) -> None:
    row = pins.ngc_release(release)
    inputs = lock.lock_inputs(release)
    with tempfile.NamedTemporaryFile("w", suffix=".in", delete=False) as f:
        f.write("\n".join(inputs) + "\n")
        requirements = f.name
    env = dict(os.environ)
    # uv reads the system's CA bundle this way (pip's own setting does not reach it).
    env.setdefault("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    try:
        body = subprocess.run(
            [uv(), "pip", "compile", requirements, "--quiet", "--no-header",
             "--no-annotate", "--python-version", row["python"],
             "--python-platform", lock.PLATFORM],
            check=True, env=env, stdout=subprocess.PIPE, text=True).stdout
    finally:
        os.unlink(requirements)
    header = [f"# The GPU image's Python environment on NGC {release} (Python {row['python']},"
              f" {lock.PLATFORM}).",
              "# Made by scripts/lock_gpu.py from the inputs below; do not edit by hand."]
    header += [lock.INPUTS_MARK + i for i in inputs]
    out.write_text("\n".join(header) + "\n" + body)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    releases = [a for a in argv if a != "--check"] or [
        r for r, row in pins.ngc_releases().items() if "vllm" in row]
    stale = []
    for release in releases:
        target = pins.gpu_lock_path(release)
        if check:
            with tempfile.TemporaryDirectory() as tmp:
                fresh = Path(tmp) / target.name
                resolve(release, fresh)
                if not target.exists() or fresh.read_text() != target.read_text():
                    stale.append(release)
                    old = target.read_text().splitlines() if target.exists() else []
                    for line in sorted(set(fresh.read_text().splitlines()) ^ set(old)):
                        print(f"{release}: {'+' if line not in old else '-'} {line}")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            resolve(release, target)
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print(f"stale locks: {', '.join(stale)} (run scripts/lock_gpu.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

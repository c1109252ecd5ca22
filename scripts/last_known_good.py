#!/usr/bin/env python3
"""Move the last-known-good pin file to a build that passed QA and was published.

    scripts/last_known_good.py BUILD_DIR --write release/last-known-good-cpu.json

Reads what build.py left in BUILD_DIR (qa/summary.json, published.json, release.json,
plan.json) and writes the pin file: the image by digest, its tags, the commit, and every
pinned version.  Refuses, leaving the file as it was, unless QA passed and the image was
pushed: the file only ever names a green, published build.  Exit 0 moved, 1 refused.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def pin_record(build_dir: Path) -> dict:
    def load(name: str) -> dict:
        path = build_dir / name
        if not path.is_file():
            raise ValueError(f"{path} is missing")
        return json.loads(path.read_text())
    summary = load("qa/summary.json")
    if not summary.get("ok"):
        failed = [s["name"] for s in summary.get("suites", []) if not s.get("ok")]
        raise ValueError(f"QA did not pass (failed: {', '.join(failed) or 'versions check'})")
    published, release, plan = load("published.json"), load("release.json"), load("plan.json")
    if release["dirty"]["value"]:
        raise ValueError("the build came from a tree with uncommitted changes")
    return {
        "image": published["reference"],
        "digest": published["digest"],
        "tags": published["tags"],
        "git_sha": release["git_sha"]["value"],
        "flavor": plan["flavor"]["value"],
        "pins": plan["pins"]["value"],
        "qa": {s["name"]: {"passed": s["passed"], "skipped": s["skipped"],
                           "seconds": s["seconds"]} for s in summary["suites"]},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build_dir", type=Path)
    p.add_argument("--write", type=Path, required=True, metavar="FILE")
    args = p.parse_args(argv)
    try:
        record = pin_record(args.build_dir)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"last_known_good: not moved: {e}", file=sys.stderr)
        return 1
    args.write.parent.mkdir(parents=True, exist_ok=True)
    # Written whole or not at all: a reader never sees half a file.
    fd, tmp = tempfile.mkstemp(dir=args.write.parent, prefix=".last-known-good.")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, args.write)
    print(f"last_known_good: {args.write} -> {record['image']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

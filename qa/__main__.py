"""QA of a built image: run the L0 suites against it, write JUnit XML and a summary.

    python -m qa IMAGE [SUITE ...] [--suites A,B] [--out DIR]

Each suite is one pytest run in container mode (TVB_IMAGE=IMAGE), with its own JUnit
file `DIR/junit/SUITE.xml` and the figures it measured (`DIR/figures/SUITE.json`, see
qa/common/figures.py).  The summary (`DIR/summary.json`, `summary.md`, and
`summary.html`, a self-contained page) gives pass/fail/skip and the duration per suite,
the image's id, digests and size, and every pinned version as `IMAGE versions --json`
reports it.  Exit status 1 when any suite fails (or runs no test), 2 on bad arguments.

`./build.py ... --qa[=SUITES]` runs this on the image it built, with DIR the build
directory's `qa/`; the suites are those of tritonbuild.release.plan.QA_SUITES.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonbuild.hostenv import docker_binary
from tritonbuild.release.plan import QA_SUITES

REPO = Path(__file__).resolve().parent.parent


@dataclass
class SuiteResult:
    name: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    exit_code: int = 0
    junit: str = ""
    figures: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        # pytest's 5 (no test ran) is a failure here: a suite that checked nothing.
        return self.exit_code == 0 and self.failed == 0 and self.errors == 0

    @property
    def verdict(self) -> str:
        return "pass" if self.ok else "FAIL"


def read_junit(path: Path, result: SuiteResult) -> None:
    if not path.exists():
        return
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            result.failed += 1
            result.failures.append(name)
        elif case.find("error") is not None:
            result.errors += 1
            result.failures.append(name)
        elif case.find("skipped") is not None:
            result.skipped += 1
        else:
            result.passed += 1


def run_suite(image: str, suite: str, out: Path, pytest_args: list[str]) -> SuiteResult:
    junit = out / "junit" / f"{suite}.xml"
    figures = out / "figures" / f"{suite}.json"
    junit.parent.mkdir(parents=True, exist_ok=True)
    figures.unlink(missing_ok=True)
    env = {**os.environ, "TVB_IMAGE": image, "TVB_QA_FIGURES": str(figures),
           # The suites' own servers import the checkout's frontend, as in run_tests.sh.
           "PYTHONPATH": os.pathsep.join(
               p for p in (str(REPO / "frontends/openai/src"), os.environ.get("PYTHONPATH"))
               if p)}
    argv = [sys.executable, "-m", "pytest", "-m", "not gpu", f"qa/{suite}",
            f"--junitxml={junit}", "-o", f"junit_suite_name={suite}", "-p", "no:cacheprovider",
            *pytest_args]
    print(f"qa: {suite}: {' '.join(argv[1:])}", flush=True)
    started = time.monotonic()
    code = subprocess.call(argv, cwd=REPO, env=env)
    result = SuiteResult(suite, seconds=round(time.monotonic() - started, 1), exit_code=code,
                         junit=str(junit.relative_to(out)))
    read_junit(junit, result)
    if figures.exists():
        result.figures = json.loads(figures.read_text())
    return result


def describe_image(image: str) -> dict:
    docker = docker_binary()
    out = subprocess.run([docker, "image", "inspect", image], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"qa: error: the engine has no image {image}")
    info = json.loads(out.stdout)[0]
    versions = subprocess.run([docker, "run", "--rm", image, "versions", "--json"],
                              capture_output=True, text=True, timeout=300)
    try:
        rows = json.loads(versions.stdout)
    except json.JSONDecodeError:
        rows = []
    return {"image": image, "id": info["Id"], "repo_digests": info.get("RepoDigests") or [],
            "size_bytes": info["Size"], "created": info.get("Created", ""),
            "labels": info["Config"].get("Labels") or {},
            "versions": rows, "versions_check": "ok" if versions.returncode == 0 else
            f"versions exited {versions.returncode}: an installed version differs from its pin"}


def summary_markdown(s: dict) -> str:
    img = s["image"]
    lines = [f"# QA of `{img['image']}`: {'passed' if s['ok'] else 'FAILED'}", "",
             f"- image id: `{img['id']}`",
             f"- digests: {', '.join(f'`{d}`' for d in img['repo_digests']) or 'not pushed'}",
             f"- size: {img['size_bytes'] / 1e9:.3f} GB ({img['size_bytes']} bytes)",
             f"- QA wall time: {s['seconds']:.0f} s; pinned versions: {img['versions_check']}",
             "", "| suite | result | passed | failed | errors | skipped | seconds | JUnit |",
             "|---|---|---|---|---|---|---|---|"]
    for r in s["suites"]:
        lines.append(f"| {r['name']} | {'pass' if r['ok'] else 'FAIL'} | {r['passed']} | "
                     f"{r['failed']} | {r['errors']} | {r['skipped']} | {r['seconds']} | "
                     f"`{r['junit']}` |")
    failures = [f"- {r['name']}: `{f}`" for r in s["suites"] for f in r["failures"]]
    if failures:
        lines += ["", "## Failures", "", *failures]
    figures = [(r["name"], k, v) for r in s["suites"] for k, v in r["figures"].items()]
    if figures:
        lines += ["", "## Measured", "", "| suite | figure | value |", "|---|---|---|"]
        lines += [f"| {n} | {k} | {v['value']} {v.get('unit', '')} |" for n, k, v in figures]
    lines += ["", "## Pinned versions", "", "| name | pinned | installed |", "|---|---|---|"]
    lines += [f"| {r['name']} | {r['pinned'] or '—'} | {r['installed'] or '—'} |"
              for r in img["versions"]]
    return "\n".join(lines) + "\n"


def summary_html(s: dict) -> str:
    """One page, no external resources: the same content as the Markdown, as tables."""
    e = html.escape
    img = s["image"]

    def table(head: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
        out = ["<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"]
        for i, row in enumerate(rows):
            cls = f' class="{classes[i]}"' if classes else ""
            out.append(f"<tr{cls}>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>")
        return "\n".join(out) + "</table>"

    suites = table(["suite", "result", "passed", "failed", "errors", "skipped", "seconds", "JUnit"],
                   [[r["name"], "pass" if r["ok"] else "FAIL", r["passed"], r["failed"],
                     r["errors"], r["skipped"], r["seconds"], r["junit"]] for r in s["suites"]],
                   ["ok" if r["ok"] else "bad" for r in s["suites"]])
    figures = table(["suite", "figure", "value"],
                    [[r["name"], k, f"{v['value']} {v.get('unit', '')}"]
                     for r in s["suites"] for k, v in r["figures"].items()])
    failures = "".join(f"<li><code>{e(r['name'])}: {e(f)}</code></li>"
                       for r in s["suites"] for f in r["failures"])
    versions = table(["name", "pinned", "installed"],
                     [[r["name"], r["pinned"] or "—", r["installed"] or "—"]
                      for r in img["versions"]])
    verdict = "passed" if s["ok"] else "FAILED"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>QA of {e(img['image'])}: {verdict}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: .3em .7em; text-align: left; }}
tr.ok td:nth-child(2) {{ color: #070; font-weight: bold; }}
tr.bad td:nth-child(2) {{ color: #b00; font-weight: bold; }}
code {{ font-size: .9em; }}
</style></head><body>
<h1>QA of <code>{e(img['image'])}</code>: {verdict}</h1>
<ul>
<li>image id: <code>{e(img['id'])}</code></li>
<li>digests: {e(', '.join(img['repo_digests']) or 'not pushed')}</li>
<li>size: {img['size_bytes'] / 1e9:.3f} GB ({img['size_bytes']} bytes)</li>
<li>QA wall time: {s['seconds']:.0f} s; pinned versions: {e(img['versions_check'])}</li>
</ul>
<h2>Suites</h2>{suites}
{f'<h2>Failures</h2><ul>{failures}</ul>' if failures else ''}
<h2>Measured</h2>{figures}
<h2>Pinned versions</h2>{versions}
</body></html>
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m qa", description=__doc__.split("\n\n")[0])
    p.add_argument("image")
    p.add_argument("suite", nargs="*", help=f"suites to run (default all: {', '.join(QA_SUITES)})")
    p.add_argument("--suites", help="the same, comma-separated")
    p.add_argument("--out", type=Path, default=REPO / "build" / "qa",
                   help="where the JUnit files and the summary go (default build/qa)")
    p.add_argument("--pytest-arg", action="append", default=[],
                   help="extra argument for each suite's pytest run (repeatable)")
    args = p.parse_args(argv)
    chosen = [*args.suite, *(args.suites.split(",") if args.suites else [])] or list(QA_SUITES)
    chosen = [c.strip().removeprefix("qa/").rstrip("/") for c in chosen if c.strip()]
    unknown = [c for c in chosen if c not in QA_SUITES]
    if unknown:
        p.error(f"unknown suite {', '.join(unknown)}: choose from {', '.join(QA_SUITES)}")
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    image = describe_image(args.image)
    results = [run_suite(args.image, suite, out, args.pytest_arg)
               for suite in dict.fromkeys(chosen)]
    summary = {"ok": all(r.ok for r in results) and image["versions_check"] == "ok",
               "seconds": round(time.monotonic() - started, 1), "image": image,
               "suites": [{**asdict(r), "ok": r.ok} for r in results]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(summary_markdown(summary))
    (out / "summary.html").write_text(summary_html(summary))
    for r in results:
        print(f"qa: {r.name}: {r.verdict} ({r.passed} passed, {r.failed} failed, "
              f"{r.errors} errors, {r.skipped} skipped, {r.seconds} s)")
    print(f"qa: {'passed' if summary['ok'] else 'FAILED'} in {summary['seconds']:.0f} s; "
          f"summary: {out / 'summary.html'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

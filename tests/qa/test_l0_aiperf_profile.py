"""qa/L0_aiperf/profile.py: the aiperf command line, and its reading of aiperf's JSON
export (the shapes below are those aiperf 0.13 writes)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qa.L0_aiperf.profile import (
    EXPORT_FILE,
    Profile,
    figures,
    pinned_version,
    problems,
    read_export,
)

PROFILE = Profile(model="tiny", url="http://127.0.0.1:9000", tokenizer=Path("/m/tiny"),
                  output_tokens=16, requests=20)


def stats(value: float, count: int = 20, unit: str = "ms") -> dict:
    return {"unit": unit, "avg": value, "p50": value, "p99": value * 2, "min": value,
            "max": value, "std": 0.0, "count": count, "sum": value * count}


def clean_export() -> dict:
    return {
        "aiperf_version": "0.13.0", "is_complete": True, "was_cancelled": False,
        "error_summary": [],
        "request_count": {"unit": "requests", "avg": 20.0},
        "completed_request_count": {"unit": "requests", "avg": 20.0},
        "request_error_rate": {"unit": "%", "avg": 0.0},
        "request_throughput": {"unit": "requests/sec", "avg": 36.02292},
        "output_token_throughput": {"unit": "tokens/sec", "avg": 576.3667},
        "time_to_first_token": stats(13.939),
        "inter_token_latency": stats(6.103),
        "request_latency": stats(98.705),
        "output_sequence_length": stats(16.0, unit="tokens"),
    }


def test_the_command_asks_for_fixed_token_counts_on_streamed_chat():
    argv = PROFILE.argv("/v/bin/aiperf", Path("/tmp/a"))
    assert argv[:2] == ["/v/bin/aiperf", "profile"]
    pairs = dict(zip(argv[2:], argv[3:], strict=False))
    assert pairs["--endpoint-type"] == "chat" and "--streaming" in argv
    assert pairs["--model"] == "tiny" and pairs["--url"] == "http://127.0.0.1:9000"
    assert pairs["--tokenizer"] == "/m/tiny"
    assert pairs["--synthetic-input-tokens-stddev"] == pairs["--output-tokens-stddev"] == "0"
    assert pairs["--output-tokens-mean"] == "16" and pairs["--request-count"] == "20"
    assert pairs["--extra-inputs"] == "ignore_eos:true"
    assert "--use-server-token-count" in argv
    assert pairs["--artifact-dir"] == "/tmp/a"


def test_a_clean_complete_run_has_no_problems():
    assert problems(clean_export(), PROFILE) == []


def test_failed_requests_are_problems_though_aiperf_exits_0():
    export = clean_export()
    export["request_count"]["avg"] = 19.0
    export["error_request_count"] = {"unit": "requests", "avg": 1.0}
    export["error_summary"] = [{"error_details": {"code": 500, "type": "Internal Server Error",
                                                  "message": "boom"}, "count": 1}]
    export["output_sequence_length"]["count"] = 19
    found = problems(export, PROFILE)
    assert found[0].startswith('1 requests failed: [{"error_details": {"code": 500')
    assert found[1] == "19 of 20 requests succeeded"
    assert found[2] == ("output tokens per request: min 16.0, max 16.0 over 19 requests, "
                        "not 16 each")


def test_short_answers_are_problems():
    export = clean_export()
    export["output_sequence_length"]["min"] = 3.0
    assert problems(export, PROFILE) == [
        "output tokens per request: min 3.0, max 16.0 over 20 requests, not 16 each"]


def test_missing_token_counts_and_an_incomplete_run_are_problems():
    export = clean_export()
    del export["output_sequence_length"]
    export["is_complete"], export["was_cancelled"] = False, True
    assert problems(export, PROFILE) == [
        "the run did not complete (is_complete=False, was_cancelled=True)",
        "no output token counts (does the stream end with `usage`?)"]


def test_figures_for_the_summary():
    assert figures(clean_export()) == {
        "requests_per_s": (36.02, "req/s"), "output_tokens_per_s": (576.37, "tokens/s"),
        "ttft_p50_ms": (13.94, "ms"), "ttft_p99_ms": (27.88, "ms"), "itl_p50_ms": (6.1, "ms"),
        "request_latency_p50_ms": (98.7, "ms")}


def test_a_missing_figure_is_an_error():
    export = clean_export()
    del export["inter_token_latency"]
    with pytest.raises(AssertionError, match="no inter_token_latency.p50"):
        figures(export)


def test_read_export(tmp_path):
    (tmp_path / EXPORT_FILE).write_text(json.dumps(clean_export()))
    assert read_export(tmp_path)["aiperf_version"] == "0.13.0"
    (tmp_path / EXPORT_FILE).unlink()
    (tmp_path / "logs").mkdir()
    with pytest.raises(AssertionError, match=r"aiperf wrote no profile_export_aiperf.json .*\['logs'\]"):
        read_export(tmp_path)


def test_the_pin_is_one_exact_release():
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned_version())


def test_a_loose_or_missing_pin_is_refused(tmp_path):
    (tmp_path / "r.txt").write_text("# comment\naiperf>=0.13\n")
    with pytest.raises(ValueError, match="pins no aiperf==VERSION"):
        pinned_version(tmp_path / "r.txt")
    (tmp_path / "r.txt").write_text("aiperf==0.13.0  # the one we measured\n")
    assert pinned_version(tmp_path / "r.txt") == "0.13.0"

"""bench_serve's own parts: the command it runs, reading vLLM's result, the table."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_serve as bench  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def result_json(tok_s: float, ttft: float = 10.0, failed: int = 0, **more) -> str:
    """What `vllm bench serve --save-result` writes (the keys bench_serve reads, and some)."""
    return json.dumps({"backend": "openai-chat", "completed": 16 - failed, "failed": failed,
                       "output_throughput": tok_s, "median_ttft_ms": ttft,
                       "p99_ttft_ms": 2 * ttft, "median_tpot_ms": 2.0, "median_itl_ms": 1.5,
                       "p99_itl_ms": 9.0, "total_token_throughput": 3 * tok_s, **more})


def test_the_command_is_vllms_chat_benchmark_with_the_asked_figures():
    argv = bench.bench_args(base_url="http://127.0.0.1:1234", tokenizer="/m", concurrency=16,
                            prompts=64, result_dir="/r", result_file="x.json")
    text = shlex.join(argv)
    assert argv[:2] == ["bench", "serve"]
    for part in ("--backend openai-chat --endpoint /v1/chat/completions",
                 "--base-url http://127.0.0.1:1234", "--model vllm_model --tokenizer /m",
                 "--dataset-name random --random-input-len 32 --random-output-len 64 --ignore-eos",
                 "--num-prompts 64 --max-concurrency 16 --num-warmups 16",
                 "--percentile-metrics ttft,tpot,itl --metric-percentiles 50,99",
                 "--save-result --result-dir /r --result-filename x.json"):
        assert part in text


def test_the_command_parses_with_vllms_own_parser():
    serve = pytest.importorskip("vllm.benchmarks.serve")
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    p = FlexibleArgumentParser()
    serve.add_cli_args(p)
    args = p.parse_args(bench.bench_args(base_url="http://h:1", tokenizer="/m", concurrency=4,
                                         prompts=16, result_dir="/r", result_file="x.json")[2:])
    assert (args.backend, args.max_concurrency, args.num_prompts) == ("openai-chat", 4, 16)
    assert args.ignore_eos and args.save_result and args.percentile_metrics == "ttft,tpot,itl"


def test_num_prompts_defaults_to_four_per_client_at_least_sixteen():
    assert [bench.num_prompts(c) for c in (1, 4, 16, 64)] == [16, 16, 64, 256]
    assert bench.num_prompts(64, 100) == 100


def test_reads_the_figures_of_a_result():
    got = bench.read_result(result_json(1000.0, failed=2))
    assert got == {"output_throughput": 1000.0, "median_ttft_ms": 10.0, "p99_ttft_ms": 20.0,
                   "median_tpot_ms": 2.0, "median_itl_ms": 1.5, "p99_itl_ms": 9.0,
                   "completed": 14, "failed": 2}


def test_a_result_without_the_percentiles_names_them():
    data = json.loads(result_json(1.0))
    del data["p99_itl_ms"]
    with pytest.raises(ValueError, match="no p99_itl_ms"):
        bench.read_result(json.dumps(data))


def _run(server, r, c, tok_s, ttft, failed=0):
    return {"round": r, "server": server, "concurrency": c, "ready_s": 30.0 + r,
            **bench.read_result(result_json(tok_s, ttft, failed))}


def test_ratios_are_taken_within_each_round_and_servers_alternate():
    assert [bench.server_order(r) for r in range(3)] == [("ours", "vllm"), ("vllm", "ours"),
                                                         ("ours", "vllm")]
    # A slower host in round 2 slows both: the ratio stays, the medians spread.
    runs = [_run("ours", 1, 16, 1200.0, 10.0), _run("vllm", 1, 16, 1000.0, 20.0),
            _run("vllm", 2, 16, 500.0, 40.0, failed=1), _run("ours", 2, 16, 400.0, 40.0),
            _run("ours", 3, 16, 1100.0, 10.0), _run("vllm", 3, 16, 1000.0, 10.0)]
    rows = {row["figure"]: row for row in bench.summarize(runs)}
    tok = rows["output_throughput"]
    assert tok["ours"] == {"median": 1100.0, "min": 400.0, "max": 1200.0}
    assert tok["vllm"] == {"median": 1000.0, "min": 500.0, "max": 1000.0}
    assert tok["ratio"] == {"median": pytest.approx(1.1), "min": pytest.approx(0.8),
                            "max": pytest.approx(1.2)}
    assert rows["median_ttft_ms"]["ratio"] == {"median": 1.0, "min": 0.5, "max": 1.0}
    assert rows["failed"] == {"concurrency": 16, "figure": "failed", "ours": 0, "vllm": 1}
    text = bench.table(bench.summarize(runs))
    assert text.splitlines()[:2] == ["| conc | figure | ours | vLLM | ours / vLLM |",
                                     "|---|---|---|---|---|"]
    assert "| 16 | output tok/s | 1100 (400-1200) | 1000 (500-1000) | 1.10 (0.80-1.20) |" in text
    assert "| 16 | TTFT p50 ms | 10.00 (10.00-40.00) | 20.00 (10.00-40.00) | 1.00 (0.50-1.00) |" in text
    assert "| 16 | failed requests | 0 | 1 | |" in text
    assert bench.ready_line(runs) == "start to ready (median): ours 32.0 s, vllm 32.0 s"


def test_levels_come_in_order_with_a_server_missing_a_round():
    runs = [_run("ours", 1, 64, 10.0, 1.0), _run("ours", 1, 1, 1.0, 1.0),
            _run("vllm", 1, 1, 2.0, 1.0)]
    rows = bench.summarize(runs)
    assert [r["concurrency"] for r in rows] == [1] * 7 + [64] * 7
    c64 = {r["figure"]: r for r in rows if r["concurrency"] == 64}
    assert c64["output_throughput"]["vllm"] is None and c64["output_throughput"]["ratio"] is None
    assert "| 64 | output tok/s | 10 (10-10) | - | - |" in bench.table(rows)


def test_options():
    args = bench.parser().parse_args(["--image", "i", "--ours-env", "STREAM_INTERVAL_MAX=1",
                                      "--vllm-arg=--stream-interval 13", "--client", "image"])
    assert (args.rounds, args.concurrency, args.num_prompts) == (3, "1,16,64", None)
    assert args.ours_env == ["STREAM_INTERVAL_MAX=1"] and args.client == "image"
    assert [f for a in args.vllm_arg for f in shlex.split(a)] == ["--stream-interval", "13"]


def test_an_environment_without_equals_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--image", "i", "--ours-env", "STREAM_INTERVAL_MAX"])
    assert "--ours-env 'STREAM_INTERVAL_MAX': expected KEY=VALUE" in capsys.readouterr().err


def test_the_readmes_commands_take_these_flags():
    text = (REPO / "README.md").read_text().replace("\\\n", " ")
    found = re.findall(r"^.*bench/bench_serve\.py .*$", text, re.MULTILINE)
    assert found
    for line in found:
        words = shlex.split(line.split("#")[0])
        args = bench.parser().parse_args(words[words.index("bench/bench_serve.py") + 1:])
        assert args.image

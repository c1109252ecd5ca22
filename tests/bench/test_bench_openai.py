"""The benchmark's own arithmetic and the vLLM server flags it derives from a model.json."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_openai as bench  # noqa: E402

from qa.common.image_servers import vllm_server_flags


def test_vllm_flags_mirror_the_model_json():
    flags = vllm_server_flags({"model": "/opt/models/tiny-llama", "max_model_len": 2048,
                               "disable_log_stats": False, "enable_prefix_caching": True,
                               "dtype": "bfloat16", "seed": None,
                               "limit_mm_per_prompt": {"image": 0}})
    assert flags == ["--model", "/opt/models/tiny-llama", "--max-model-len", "2048",
                     "--enable-prefix-caching",
                     "--dtype", "bfloat16", "--limit-mm-per-prompt", '{"image": 0}']


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None), ([3.0], 99, 3.0), ([4.0, 1.0, 3.0, 2.0, 5.0], 50, 3.0),
    ([4.0, 1.0, 3.0, 2.0, 5.0], 99, 5.0), ([4.0, 1.0, 3.0, 2.0, 5.0], 0, 1.0)])
def test_percentile_is_the_nearest_rank(values, q, expected):
    got = bench.percentile(values, q)
    assert (got != got) if expected is None else got == expected


def test_tpot_is_vllms_time_per_output_token():
    # 1 s to the first token, 9 more tokens over 4.5 s: 0.5 s per token, whatever the events.
    assert bench.RequestResult(1.0, [], 10, 5.5).tpot == pytest.approx(0.5)
    assert bench.RequestResult(1.0, [], 1, 1.0).tpot is None
    assert bench.RequestResult(float("nan"), [], 10, 5.0).tpot is None


def _level(target, tokens_per_request, seconds, ttft):
    results = [bench.RequestResult(ttft, [0.01], tokens_per_request, ttft + 1)] * 4
    return bench.LevelResult(target, 8, 4, seconds, results)


def test_ratios_are_taken_within_each_round():
    runs = {("openai-chat", 8): [_level("openai-chat", 100, 1.0, 0.2),
                                 _level("openai-chat", 100, 2.0, 0.2)],
            ("vllm-chat", 8): [_level("vllm-chat", 100, 2.0, 0.1),
                               _level("vllm-chat", 100, 1.0, 0.1)]}
    summary = bench.summarize(runs, [("openai-chat", "vllm-chat")])
    ratio = summary["ratios"][0]
    assert ratio["openai-chat/vllm-chat"] == {"median": 1.25, "min": 0.5, "max": 2.0}
    assert ratio["openai-chat/vllm-chat ttft"] == {"median": 2.0, "min": 2.0, "max": 2.0}
    text = bench.table(summary, bench.IMAGE_TARGETS, bench.IMAGE_PAIRS)
    assert "| 8 | 1.25 (0.50-2.00) | 2.00 (2.00-2.00) |" in text


def test_image_mode_refuses_host_targets(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--image", "some:image", "--targets", "frontend"])
    assert "unknown target(s): frontend" in capsys.readouterr().err

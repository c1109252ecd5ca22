"""qa.common.metrics: the Prometheus reading the QA suites share."""

from __future__ import annotations

import pytest

from qa.common.metrics import series_total, settled

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model="vllm_model",version="1"} 3
vllm:num_requests_running{model="vllm_model_2",version="1"} 4
vllm:num_requests_running_total{model="vllm_model",version="1"} 100
vllm:generation_tokens_total{model="vllm_model",version="1"} 1.5e+03
"""


def test_series_total_sums_the_series_whose_labels_match():
    assert series_total(PAGE, "vllm:num_requests_running") == 7
    assert series_total(PAGE, "vllm:num_requests_running", model="vllm_model") == 3
    assert series_total(PAGE, "vllm:num_requests_running", model="vllm_model_2",
                        version="1") == 4
    assert series_total(PAGE, "vllm:generation_tokens_total", model="vllm_model") == 1500


def test_series_total_is_zero_without_the_series():
    assert series_total(PAGE, "vllm:num_requests_waiting") == 0
    assert series_total(PAGE, "vllm:num_requests_running", model="other") == 0


def test_settled_waits_until_two_reads_agree():
    reads = iter([1, 2, 3, 3])
    assert settled(lambda: next(reads), "x", interval=0) == 3


def test_settled_fails_on_a_value_that_keeps_moving():
    reads = iter(range(100))
    with pytest.raises(AssertionError, match="x kept moving"):
        settled(lambda: next(reads), "x", interval=0, tries=5)

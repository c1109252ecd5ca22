"""qa.common.metrics: the Prometheus reading the QA suites share."""

from __future__ import annotations

import pytest

from qa.common.metrics import metric_type, samples, series_total, settled

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model="vllm_model",version="1"} 3
vllm:num_requests_running{model="vllm_model_2",version="1"} 4
vllm:num_requests_running{base_model="vllm_model",model="lora",version="1"} 5
# TYPE vllm:num_requests_running_total counter
vllm:num_requests_running_total{model="vllm_model",version="1"} 100
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model="vllm_model",version="1"} 1.5e+03 1700000000000
# TYPE vllm:num_preemptions_total counter
# TYPE vllm:ttft_seconds histogram
vllm:ttft_seconds_bucket{model="vllm_model",le="0.5"} 1
vllm:ttft_seconds_bucket{model="vllm_model",le="+Inf"} 2
vllm:ttft_seconds_count{model="vllm_model"} 2
vllm:ttft_seconds_sum{model="vllm_model"} 0.75
# HELP nv_inference_request_success Number of successful inference requests
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="vllm_model",version="1"} 6
# HELP openai_frontend_requests_total Requests
# TYPE openai_frontend_requests_total counter
openai_frontend_requests_total{method="POST",path="/v1/completions",status="200"} 1.0
"""


def test_series_total_sums_the_series_whose_labels_match():
    assert series_total(PAGE, "vllm:num_requests_running") == 12
    assert series_total(PAGE, "vllm:num_requests_running", model="vllm_model") == 3
    assert series_total(PAGE, "vllm:num_requests_running", model="vllm_model_2",
                        version="1") == 4
    assert series_total(PAGE, "vllm:generation_tokens_total", model="vllm_model") == 1500
    assert series_total(PAGE, "vllm:ttft_seconds_bucket", le="+Inf") == 2


def test_labels_match_exactly_not_as_substrings():
    # base_model="vllm_model" holds the text model="vllm_model"; it is another label.
    assert series_total(PAGE, "vllm:num_requests_running", model="vllm_model") == 3
    assert series_total(PAGE, "vllm:num_requests_running", model="vllm") == 0
    assert series_total(PAGE, "vllm:num_requests_running", base_model="vllm_model") == 5
    assert series_total(PAGE, "vllm:ttft_seconds_bucket", le="0.5") == 1
    assert series_total(PAGE, "vllm:ttft_seconds_bucket", le="0.50") == 0


def test_a_counter_is_found_with_or_without_its_total_suffix():
    assert series_total(PAGE, "nv_inference_request_success", model="vllm_model") == 6
    assert series_total(PAGE, "nv_inference_request_success_total") == 6


def test_series_total_is_zero_without_the_series():
    assert series_total(PAGE, "vllm:num_requests_waiting") == 0
    assert series_total(PAGE, "vllm:num_requests_running", model="other") == 0
    assert series_total(PAGE, "vllm:num_preemptions_total") == 0


def test_samples_carry_their_labels():
    found = samples(PAGE, "openai_frontend_requests_total", path="/v1/completions")
    assert [(s.labels, s.value) for s in found] == [
        ({"method": "POST", "path": "/v1/completions", "status": "200"}, 1.0)]


def test_metric_type_by_the_metric_or_a_sample_name():
    assert metric_type(PAGE, "vllm:num_requests_running") == "gauge"
    assert metric_type(PAGE, "vllm:num_requests_running_total") == "counter"
    assert metric_type(PAGE, "vllm:num_preemptions_total") == "counter"  # no series yet
    assert metric_type(PAGE, "nv_inference_request_success") == "counter"
    assert metric_type(PAGE, "vllm:ttft_seconds") == "histogram"
    assert metric_type(PAGE, "vllm:ttft_seconds_count") == "histogram"
    assert metric_type(PAGE, "vllm:num_requests_waiting") is None


def test_a_page_that_is_not_prometheus_text_is_an_error():
    with pytest.raises(ValueError, match="not a Prometheus text page"):
        series_total("<html><body>Not Found</body></html>", "x")


def test_settled_waits_until_two_reads_agree():
    reads = iter([1, 2, 3, 3])
    assert settled(lambda: next(reads), "x", interval=0) == 3


def test_settled_fails_on_a_value_that_keeps_moving():
    reads = iter(range(100))
    with pytest.raises(AssertionError, match="x kept moving"):
        settled(lambda: next(reads), "x", interval=0, tries=5)

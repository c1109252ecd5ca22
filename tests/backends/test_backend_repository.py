"""The repository generator (triton_vllm_backend.repository): spec in, files out."""
from __future__ import annotations

import pytest
from triton_vllm_backend.repository import (
    ModelSpec,
    RepositoryError,
    repository_files,
    triton_name,
    write_repository,
)


def test_a_generating_model_publishes_its_parameters_and_metrics():
    files = repository_files([ModelSpec("m", {"model": "/m", "max_model_len": 512,
                                              "disable_log_stats": False})])
    config = files["m/config.pbtxt"]
    assert 'backend: "vllm"' in config and "kind: KIND_MODEL" in config
    assert 'key: "vllm_model" value: { string_value: "/m" }' in config
    assert 'key: "vllm_runner" value: { string_value: "generate" }' in config
    assert 'key: "vllm_max_model_len" value: { string_value: "512" }' in config
    assert 'key: "REPORT_CUSTOM_METRICS"' in config
    assert files["m/1/model.json"].startswith('{\n  "model": "/m",')


def test_without_statistics_no_metrics_are_asked_for():
    config = repository_files([ModelSpec("m", {"model": "/m", "disable_log_stats": True})])
    assert "REPORT_CUSTOM_METRICS" not in config["m/config.pbtxt"]


def test_a_pooling_model():
    config = repository_files([ModelSpec("e", {"model": "/e", "runner": "pooling"})])
    assert 'key: "vllm_runner" value: { string_value: "pooling" }' in config["e/config.pbtxt"]


@pytest.mark.parametrize("specs, message", [
    ([ModelSpec("a/b", {"model": "/m"})], "'a/b' is not a Triton model name"),
    ([ModelSpec("_a", {"model": "/m"})], "'_a' is not a Triton model name"),
    ([ModelSpec("llm\n", {"model": "/m"})], "'llm\\n' is not a Triton model name"),
    ([ModelSpec("a", {})], "model a: the engine argument 'model' is required"),
    ([ModelSpec("a", {"model": "/m"}), ModelSpec("a", {"model": "/n"})],
     "two models are named 'a': give each its own --served-model-name"),
])
def test_refused(specs, message):
    with pytest.raises(RepositoryError) as e:
        repository_files(specs)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize("model, name", [
    ("/models/my-llm/", "my-llm"), ("org/Model-1.5B", "Model-1.5B"), ("/m/a b+c", "a_b_c"),
])
def test_names_come_from_the_folder(model, name):
    assert triton_name(model) == name


def test_write_repository(tmp_path):
    write_repository([ModelSpec("m", {"model": "/m"})], tmp_path / "r")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) \
        == ["r/m/1/model.json", "r/m/config.pbtxt"]

"""Fixtures of the vLLM backend suite."""

import pytest

from qa.common import TritonServer, write_vllm_model

from .vllm_suite import MODEL, engine_args


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    """tritonserver serving the tiny model, with vLLM's metrics reported to Triton, the
    per-token histogram included (models loaded by the tests keep the default set)."""
    repo = tmp_path_factory.mktemp("repository")
    write_vllm_model(repo, MODEL, engine_args(tiny_model),
                     parameters={"REPORT_CUSTOM_METRICS": "true",
                                 "REPORT_PER_TOKEN_METRICS": "true"})
    with TritonServer(repo, mounts=[tiny_model]) as running:
        yield running

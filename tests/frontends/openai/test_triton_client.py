"""Tensor encoding, the backend contract, and how the client is chosen."""

import pytest

from triton_openai.triton import vllm_io
from triton_openai.triton.client import InferResponse, Tensor, deserialize_bytes, serialize_bytes
from triton_openai.triton.select import ClientSelectionError, choose_client_kind


def test_bytes_roundtrip():
    values = [b"", b"abc", "é".encode()]
    assert deserialize_bytes(serialize_bytes(values)) == values


def test_build_inputs_prefers_token_ids():
    req = vllm_io.GenerationRequest("m", "r", {"max_tokens": 3}, True, "hi", [1, 2], logprobs=True)
    inputs, outputs = vllm_io.build_inputs(req)
    names = [t.name for t in inputs]
    assert "input_ids" in names and "text_input" not in names
    assert "logprobs" in outputs
    ids = next(t for t in inputs if t.name == "input_ids")
    assert ids.datatype == "INT64" and ids.shape == (2,) and ids.as_list() == [1, 2]


def test_parse_response_n_choices():
    resp = InferResponse({
        "text_output": Tensor.bytes_("text_output", ["a", "b", "c"]),
        "finish_reason": Tensor.bytes_("finish_reason", ["", "stop", "length"]),
        "num_input_tokens": Tensor.int64s("num_input_tokens", [5]),
        "num_output_tokens": Tensor.int64s("num_output_tokens", [1, 2, 3]),
    }, final=False)
    chunk = vllm_io.parse_response(resp, 3)
    assert [c.text for c in chunk.choices] == ["a", "b", "c"]
    assert [c.finish_reason for c in chunk.choices] == [None, "stop", "length"]
    assert chunk.num_input_tokens == 5


def test_parse_logprobs_shapes():
    a = vllm_io.parse_logprobs('[{"id": 1, "logprob": -1.0, "token": "x", '
                               '"top_logprobs": [{"id": 2, "logprob": -2.0, "token": "y"}]}]')
    b = vllm_io.parse_logprobs('[{"token_id": 1, "logprob": -1.0, "decoded_token": "x", '
                               '"top_logprobs": {"2": {"logprob": -2.0, "decoded_token": "y"}}}]')
    assert a[0].token == b[0].token == "x"
    assert a[0].top == b[0].top == [("y", -2.0)]


@pytest.mark.parametrize("url, repo, inproc, have, expected", [
    ("localhost:8001", None, False, False, "grpc"),
    ("localhost:8001", None, False, True, "grpc"),
    (None, "/models", True, True, "inprocess"),
])
def test_choose_client_kind(url, repo, inproc, have, expected):
    assert choose_client_kind(url, repo, inproc, have) == expected


@pytest.mark.parametrize("url, repo, inproc, have", [
    (None, "/models", True, False),  # bindings missing
    (None, None, True, True),  # no repository
    (None, None, False, False),  # nothing to talk to
])
def test_choose_client_kind_errors(url, repo, inproc, have):
    with pytest.raises(ClientSelectionError):
        choose_client_kind(url, repo, inproc, have)

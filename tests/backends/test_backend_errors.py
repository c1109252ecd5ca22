"""The kind that leads every error the backend sends (triton_vllm_backend/stub/errors.py)."""

import sys
import types

import fake_pb_utils as pb
import pytest
from triton_vllm_backend.stub import errors, lora, params, wire


@pytest.mark.parametrize("kind, code", [
    (wire.INVALID_ARGUMENT, pb.TritonError.INVALID_ARG),
    (wire.UNAVAILABLE, pb.TritonError.UNAVAILABLE),
    (wire.ENGINE_DEAD, pb.TritonError.UNAVAILABLE),
    (wire.INTERNAL, pb.TritonError.INTERNAL),
])
def test_the_error_sent_leads_with_its_kind_and_carries_its_code(kind, code):
    error = errors.triton_error(pb, kind, "what went wrong")
    assert error.message() == f"[{kind}] what went wrong"
    assert error.code() == code


def test_every_kind_has_a_code():
    for kind in wire.ERROR_KINDS:
        errors.triton_error(pb, kind, "x")


def test_a_kind_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="not an error kind: 'bad_request'"):
        wire.tagged("bad_request", "x")


class EngineGenerateError(Exception):
    """vLLM's: says nothing itself, raised from what failed."""


def _wrapped(cause: BaseException) -> BaseException:
    try:
        raise EngineGenerateError() from cause
    except EngineGenerateError as e:
        return e


@pytest.mark.parametrize("error, kind, text", [
    (params.ParameterError("unknown sampling parameter 'x'"), wire.INVALID_ARGUMENT,
     "ParameterError: unknown sampling parameter 'x'"),
    (lora.UnknownAdapter("unknown LoRA adapter 'chat'"), wire.INVALID_ARGUMENT,
     "UnknownAdapter: unknown LoRA adapter 'chat'"),
    (_wrapped(ValueError("max_tokens must be at least 1")), wire.INVALID_ARGUMENT,
     "ValueError: max_tokens must be at least 1"),
    (_wrapped(RuntimeError("CUDA error")), wire.INTERNAL, "RuntimeError: CUDA error"),
    (_wrapped(KeyError()), wire.INTERNAL, "KeyError"),
])
def test_an_exception_is_described_by_its_cause(error, kind, text):
    got_kind, got_text = errors.described(error)
    assert got_kind == kind and got_text.endswith(text)


def test_vllms_client_errors_are_invalid_arguments(monkeypatch):
    # vLLM 0.12+: its validation errors derive from VLLMClientError, not ValueError.
    exceptions = types.ModuleType("vllm.exceptions")
    exceptions.VLLMClientError = type("VLLMClientError", (Exception,), {})
    validation_error = type("VLLMValidationError", (exceptions.VLLMClientError,), {})
    monkeypatch.setitem(sys.modules, "vllm.exceptions", exceptions)
    assert errors.described(_wrapped(validation_error("prompt too long"))) == (
        wire.INVALID_ARGUMENT, "VLLMValidationError: prompt too long")

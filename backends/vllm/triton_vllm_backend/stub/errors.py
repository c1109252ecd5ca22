"""Answer a request with an error: its kind (wire.py) leads the text, its Triton error
code matches the kind.

    [invalid_argument] sampling parameter 'max_tokens' must be an integer, got 'many'

Triton passes a decoupled model's error on to clients as text alone: an `{"error": ...}`
event (or body) of the generate endpoints, whose HTTP status is a 400 whatever the
error's code, and the `error_message` of a gRPC stream, which has no code at all.  So
the kind leads the text, in brackets, where a person reading the message sees it too,
and clients (the OpenAI frontend) read it instead of guessing from the wording.  The
Triton error code is set to match, for what does carry it.
"""

from __future__ import annotations

import sys

from .wire import ENGINE_DEAD, INTERNAL, INVALID_ARGUMENT, UNAVAILABLE, tagged

# Each kind's Triton error code (a pb_utils.TritonError attribute).  A dead engine is
# unavailable to Triton as any other model that cannot serve now.
_CODES = {INVALID_ARGUMENT: "INVALID_ARG", UNAVAILABLE: "UNAVAILABLE",
          ENGINE_DEAD: "UNAVAILABLE", INTERNAL: "INTERNAL"}


def triton_error(pb_utils, kind: str, message: str):
    """The pb_utils.TritonError that answers a request with this kind of error."""
    return pb_utils.TritonError(tagged(kind, message), getattr(pb_utils.TritonError,
                                                               _CODES[kind]))


def described(error: BaseException) -> tuple[str, str]:
    """The kind of an exception raised while a request was read or served, and a message
    a client can act on.

    vLLM wraps what fails under a request in an EngineGenerateError that says nothing:
    its cause speaks.  What vLLM (and the backend's own checks) raise for a request they
    refuse is the request's fault; anything else is internal."""
    cause = error
    while cause.__cause__ is not None and str(cause) in ("", type(cause).__name__):
        cause = cause.__cause__
    text = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
    return (INVALID_ARGUMENT if isinstance(cause, _refusals()) else INTERNAL), text


def _refusals() -> tuple[type[BaseException], ...]:
    """The exceptions that say a request was refused: ValueError and TypeError (the
    backend's checks, SamplingParams, vLLM 0.11), and vLLM's VLLMClientError (0.12+,
    not a ValueError).  Looked up, not imported: importing vLLM takes seconds, and while
    it is not loaded, none of its errors can have been raised."""
    client_error = getattr(sys.modules.get("vllm.exceptions"), "VLLMClientError", None)
    return (ValueError, TypeError) + ((client_error,) if client_error else ())

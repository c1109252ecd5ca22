"""Engine health: how the backend tells a dead engine from a busy one, and says so.

    request parameters: {"vllm_health_check": true}

A request with this parameter generates nothing: the model answers it at once, with an
empty final response while its engine runs, or with an UNAVAILABLE error once the engine
has died.  It travels the whole path a generation takes (Triton, the Python backend's
stub, the model's execute()), so one answer proves all of them alive; a dead stub is
answered by Triton itself with an error.  `watch.py` (beside the server in the image)
and the chart's liveness probe ask it.

An engine that died stays dead: vLLM's AsyncLLM cannot start a new engine core under
requests that were running, so the model answers UNAVAILABLE from then on (Triton's
generate endpoint sends it as a 400, its text tagged `[unavailable]` by errors.py, which
the frontend answers with a 503), every request in flight gets an error at once, and the
server is restarted from outside (the image's watch exits, its container with it).
"""

from __future__ import annotations

from .params import request_parameters

PARAMETER = "vllm_health_check"


def is_health_check(parameters: str | dict | None) -> bool:
    """Whether a request's parameters ask for a health check (and nothing else)."""
    return request_parameters(parameters).get(PARAMETER) is True


def death_of(engine) -> BaseException | None:
    """The error an engine died of, or None while it runs.

    vLLM's AsyncLLM sets `errored` as soon as its engine-core process is gone (a monitor
    thread waits on the process), so reading it costs nothing per request."""
    if engine is None or not getattr(engine, "errored", False):
        return None
    error = getattr(engine, "dead_error", None)
    return error if isinstance(error, BaseException) else RuntimeError("the engine died")


# In every answer about a dead engine: how the watch tells a dead engine from a model
# that is unavailable for a while (unloading), as both are answered UNAVAILABLE.
DEAD_PHRASE = "cannot serve it until it is restarted"


def dead_message(model_name: str, error: BaseException | None) -> str:
    cause = f" ({type(error).__name__}: {error})" if error is not None and str(error) else ""
    return f"the vLLM engine of model '{model_name}' died{cause}; the server {DEAD_PHRASE}"

"""Engine health: how the backend tells a dead engine from a busy one, and says so.

    request parameters: {"vllm_health_check": true}

A request with this parameter generates nothing: the model answers it at once, with an
empty final response while its engine runs, or with its dead answer (below) once the
engine has died.  It travels the whole path a generation takes (Triton, the Python
backend's stub, the model's execute()), so one answer proves all of them alive; a dead
stub is answered by Triton itself with an error.  `triton_vllm_backend.watch` (beside the
server in the image), the chart's liveness probe and the OpenAI frontend's model watch
ask it.

An engine that died stays dead: vLLM's AsyncLLM cannot start a new engine core under
requests that were running, so from then on the model answers every request with an
error of kind `engine_dead` (wire.py; Triton's code UNAVAILABLE, so the frontend answers
it with a 503, as any model that cannot serve now), every request in flight gets it at
once, and the server is restarted from outside (the image's watch exits, its container
with it).  The kind, not the wording, is what tells a dead engine from a model that is
unavailable for a while (unloading, tagged `unavailable`): the watches read it.
"""

from __future__ import annotations

from .params import request_parameters
from .wire import DEAD_PHRASE, ENGINE_DEAD, HEALTH_PARAMETER


def is_health_check(parameters: str | dict | None) -> bool:
    """Whether a request's parameters ask for a health check (and nothing else)."""
    return request_parameters(parameters).get(HEALTH_PARAMETER) is True


def death_of(engine) -> BaseException | None:
    """The error an engine died of, or None while it runs.

    vLLM's AsyncLLM sets `errored` as soon as its engine-core process is gone (a monitor
    thread waits on the process), so reading it costs nothing per request."""
    if engine is None or not getattr(engine, "errored", False):
        return None
    error = getattr(engine, "dead_error", None)
    return error if isinstance(error, BaseException) else RuntimeError("the engine died")


def dead_answer(model_name: str, error: BaseException | None) -> tuple[str, str]:
    """The error (kind, message) that answers every request once the engine died: the
    kind for clients, the words for the people who read them."""
    cause = f" ({type(error).__name__}: {error})" if error is not None and str(error) else ""
    return ENGINE_DEAD, (f"the vLLM engine of model '{model_name}' died{cause}; the server "
                         f"{DEAD_PHRASE}")

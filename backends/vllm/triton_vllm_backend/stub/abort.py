"""Abort requests: a request that stops another one, named by its Triton request id.

    request parameters: {"vllm_abort_request_id": "cmpl-1234"}

Triton flags a request as cancelled only when the client's disconnect reaches it, which
a proxy in between can hide.  A client that knows it left (the OpenAI frontend) therefore
also sends this request, which aborts every running request with that id in vLLM at once,
whatever lies between.  An abort that finds no request with that id running is
remembered for a while, and the next request with that id is then answered as soon as
it arrives, without generating.

The id is the one the Triton client chose, not an end user's: the OpenAI frontend makes
a unique one per HTTP request (never the caller's X-Request-Id, which clients and
proxies reuse), so an abort, remembered or not, reaches that HTTP request's own
Triton requests and no one else's.  Other clients must keep their ids unique too.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from .params import request_parameters
from .wire import ABORT_PARAMETER

# How long, and how many, aborted ids are remembered for requests that arrive late.
REMEMBER_S = 60.0
REMEMBER_MAX = 10_000


class AbortError(ValueError):
    pass


def target_of(parameters: str | dict | None) -> str | None:
    """The request id that a request's parameters ask to abort, or None."""
    parameters = request_parameters(parameters)
    if ABORT_PARAMETER not in parameters:
        return None
    target = parameters[ABORT_PARAMETER]
    if not isinstance(target, str) or not target:
        raise AbortError(f"parameter '{ABORT_PARAMETER}' must be a non-empty request id")
    return target


class RecentAborts:
    """Ids aborted in the last REMEMBER_S seconds (at most REMEMBER_MAX of them)."""

    def __init__(self, remember_s: float = REMEMBER_S, remember_max: int = REMEMBER_MAX,
                 clock=time.monotonic):
        self._ids: OrderedDict[str, float] = OrderedDict()
        self._remember_s = remember_s
        self._remember_max = remember_max
        self._clock = clock

    def add(self, request_id: str) -> None:
        self._ids[request_id] = self._clock()
        self._ids.move_to_end(request_id)
        self._prune()

    def __contains__(self, request_id: str) -> bool:
        self._prune()
        return request_id in self._ids

    def take(self, request_id: str) -> bool:
        """Whether `request_id` was aborted before it came; the abort is used up."""
        self._prune()
        return self._ids.pop(request_id, None) is not None

    def _prune(self) -> None:
        oldest_kept = self._clock() - self._remember_s
        while self._ids and (len(self._ids) > self._remember_max
                             or next(iter(self._ids.values())) < oldest_kept):
            self._ids.popitem(last=False)

"""The requests a model instance is serving, and which of them are to stop.

Pure bookkeeping for model.py (no Triton, no vLLM); every method runs on the engine's
event loop, so nothing here needs a lock.  A request is known by this backend's id (the
one vLLM knows it by) and by the Triton id its client chose (the OpenAI frontend: a
unique one per HTTP request), which abort requests name (see abort.py) and which a
client may reuse once a request with it has ended.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .abort import RecentAborts


class RequestsInFlight:
    def __init__(self, recent_aborts: RecentAborts | None = None):
        # id -> what model.py holds for the request (the request object and its response
        # sender: the request object must live until the request ends, or the Python
        # backend releases it in Triton and a client's disconnect is never flagged).
        self._active: dict[str, Any] = {}
        self._client_of: dict[str, str] = {}
        self._by_client_id: dict[str, set[str]] = {}
        self._cancelled: set[str] = set()  # ids in _active whose client went away
        self._recent_aborts = recent_aborts if recent_aborts is not None else RecentAborts()

    def start(self, request_id: str, client_id: str, held: Any) -> bool:
        """Track a request; False when its abort came first (nobody waits for it then)."""
        if client_id and self._recent_aborts.take(client_id):
            return False
        self._active[request_id] = held
        if client_id:
            self._client_of[request_id] = client_id
            self._by_client_id.setdefault(client_id, set()).add(request_id)
        return True

    def finish(self, request_id: str) -> None:
        self._active.pop(request_id, None)
        self._cancelled.discard(request_id)
        client_id = self._client_of.pop(request_id, None)
        if client_id is not None:
            same_id = self._by_client_id.get(client_id, set())
            same_id.discard(request_id)
            if not same_id:
                self._by_client_id.pop(client_id, None)

    def abort_client(self, client_id: str) -> list[str]:
        """Cancel the running requests with this Triton id and return their ids; when none
        runs, remember the abort for a request that has not come yet.  Only then: a later
        request must not inherit an abort that already found its target."""
        ids = [rid for rid in self._by_client_id.get(client_id, ())
               if rid not in self._cancelled]
        if ids:
            self._cancelled.update(ids)
        else:
            self._recent_aborts.add(client_id)
        return ids

    def cancel(self, request_id: str) -> None:
        if request_id in self._active:
            self._cancelled.add(request_id)

    def is_cancelled(self, request_id: str) -> bool:
        return request_id in self._cancelled

    def running(self) -> Iterator[tuple[str, Any]]:
        """(id, held) of the requests not cancelled yet, as a snapshot."""
        return iter([(rid, held) for rid, held in self._active.items()
                     if rid not in self._cancelled])

    def to_abort(self) -> list[str]:
        """Cancelled requests still running: vLLM is told again until they end, as an
        abort that comes while vLLM is still registering a request finds nothing."""
        return [rid for rid in self._cancelled if rid in self._active]

    def ids(self) -> list[str]:
        return list(self._active)

    def clear(self) -> None:
        self._active.clear()
        self._client_of.clear()
        self._by_client_id.clear()
        self._cancelled.clear()

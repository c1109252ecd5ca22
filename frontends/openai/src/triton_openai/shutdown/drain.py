"""The requests in flight, and the server's state while it stops.

On SIGTERM the server begins to drain: readiness turns false and new API requests get a
503 at once, while the requests in flight may run to their end within a grace period.
Those still running when it ends are cut: their tasks are cancelled (which cancels their
Triton requests), and DrainMiddleware tells each client, a stream with an error event,
a request that has no answer yet with a 503.  Nothing ends silently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger("triton_openai.shutdown")

SHUTDOWN_MESSAGE = ("The server is shutting down and takes no new requests; "
                    "send the request again (to another replica).")
CUT_MESSAGE = ("The server shut down before this request finished: it was stopped after "
               "the shutdown grace period; send it again.")


@dataclass(eq=False)
class InFlight:
    """One API request under way."""
    method: str
    path: str
    client: str
    task: asyncio.Task | None
    started: float = field(default_factory=time.monotonic)
    response_id: str | None = None  # the answer's `id`, once a stream has shown it
    streaming: bool = False  # response headers of an event stream went out
    cut: bool = False

    def describe(self) -> str:
        if self.streaming:
            what = f"stream {self.response_id or '(id not seen)'}"
        else:
            what = "no answer yet"
        return (f"{self.method} {self.path} from {self.client} ({what}, "
                f"running {time.monotonic() - self.started:.1f} s)")


class Drain:
    def __init__(self) -> None:
        self.draining = False
        self.began: float | None = None
        self._inflight: set[InFlight] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.cut_requests: list[str] = []  # descriptions of the requests that were cut

    # --- requests ------------------------------------------------------------------
    def enter(self, method: str, path: str, client: str,
              task: asyncio.Task | None) -> InFlight:
        record = InFlight(method, path, client, task)
        self._inflight.add(record)
        self._idle.clear()
        return record

    def leave(self, record: InFlight) -> None:
        self._inflight.discard(record)
        if not self._inflight:
            self._idle.set()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # --- stopping --------------------------------------------------------------------
    def begin(self) -> None:
        """Take no new requests from now on (readiness false, 503s)."""
        if not self.draining:
            self.draining = True
            self.began = time.monotonic()
            log.info("shutting down: no new requests; waiting for %d in flight",
                     self.in_flight)

    async def wait_idle(self, timeout: float) -> bool:
        """Whether every request in flight ended within `timeout` seconds."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def cut(self) -> list[InFlight]:
        """Cancel every request still in flight; DrainMiddleware answers each."""
        cut = [r for r in self._inflight if not r.cut]
        for record in cut:
            record.cut = True
            self.cut_requests.append(record.describe())
            log.warning("shutdown grace period over; cutting %s", record.describe())
            if record.task is not None:
                record.task.cancel()
        return cut

    async def drain(self, grace: float, flush: float = 5.0) -> bool:
        """Begin, wait up to `grace` seconds for requests in flight, cut the rest, and
        give their error answers up to `flush` seconds to go out.  True when nothing
        had to be cut."""
        self.begin()
        if await self.wait_idle(grace):
            log.info("shutdown: every request finished (%.1f s)", time.monotonic() - self.began)
            return True
        cut = self.cut()
        await self.wait_idle(flush)
        log.warning("shutdown: %d request(s) cut after the %.0f s grace period",
                    len(cut), grace)
        return False

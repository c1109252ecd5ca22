"""uvicorn's Server with a drain before its own shutdown.

uvicorn alone, on SIGTERM, closes its listening socket, waits for the connections in
flight, cancels what is left after `timeout_graceful_shutdown` (a stream then just
stops), and re-raises the signal once it is done, so the process always dies of it
(status 143).  Here the first SIGTERM/SIGINT drains instead (drain.py): the socket stays
open, so that probes see readiness go false and late clients get a 503 rather than a
refused connection; requests in flight get the grace period; the rest are cut with an
error.  Then uvicorn stops as usual, and `main()` exits 0, or EXIT_CUT when it had to
cut requests.  A second signal stops at once, as uvicorn does.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import uvicorn

from .drain import Drain

log = logging.getLogger("triton_openai.shutdown")

# The frontend's exit status when it had to cut requests at shutdown.
EXIT_CUT = 3


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, drain: Drain, grace: float):
        super().__init__(config)
        self.drain = drain
        self.grace = grace
        self.loop: asyncio.AbstractEventLoop | None = None
        self._drainer: asyncio.Task | None = None
        self.clean = True

    async def startup(self, sockets=None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame) -> None:
        if self.drain.draining or self.loop is None or sig not in (signal.SIGTERM,
                                                                    signal.SIGINT):
            # A second signal (or one before start-up finished): stop now.
            self.force_exit = self.drain.draining
            self.should_exit = True
            return
        # Not recorded in _captured_signals: uvicorn would re-raise it at the end, and
        # the process would die of the signal instead of exiting with its status.
        self.loop.call_soon_threadsafe(self._begin_drain, signal.Signals(sig).name)

    def _begin_drain(self, name: str) -> None:
        if self._drainer is not None:
            return
        log.info("%s: draining (grace period %.0f s)", name, self.grace)
        self._drainer = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            self.clean = await self.drain.drain(self.grace)
        finally:
            self.should_exit = True

    @property
    def exit_status(self) -> int:
        return 0 if self.clean and not self.drain.cut_requests else EXIT_CUT

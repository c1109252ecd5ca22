"""uvicorn's Server with a drain before its own shutdown.

uvicorn alone, on SIGTERM, closes its listening socket, waits for the connections in
flight, cancels what is left after `timeout_graceful_shutdown` (a stream then just
stops), and re-raises the signal once it is done, so the process always dies of it
(status 143).  Here the first SIGTERM/SIGINT drains instead (drain.py): the socket stays
open, so that probes see readiness go false and late clients get a 503 rather than a
refused connection; requests in flight get the grace period; the rest are cut with an
error.  Then uvicorn stops as usual, and `main()` exits 0, or EXIT_CUT when it had to
cut requests.  A second signal stops at once, as uvicorn does.

Before uvicorn closes the connections, each one whose answer went out whole is
half-closed, and the server waits (LINGER_S at most) for its client to close it: the
client has then read its answer.  The bytes of an answer can still be on their way when
the process exits: in socket buffers, or in a proxy that reads faster than its client
(Docker's port proxy).  A container's network goes with its last process, and those bytes
with it: a client that read slowly lost the end of a stream that the server had
finished, and the error event of one that a dead Triton had ended.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time

import uvicorn

from .drain import Drain

log = logging.getLogger("triton_openai.shutdown")

# The frontend's exit status when it had to cut requests at shutdown.
EXIT_CUT = 3
# Seconds the server waits at most for its clients to close their connections once every
# answer went out: a client that keeps an idle connection open delays the exit this long.
# Short, since what dies with the server (a dead Triton) waits for its restart as long.
LINGER_S = 1.0


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

    async def shutdown(self, sockets=None) -> None:
        if not self.force_exit:
            await self._linger()
        await super().shutdown(sockets)

    async def _linger(self) -> None:
        """Half-close every connection whose last answer went out whole, and wait for its
        client to close it (uvicorn's protocols close on the client's EOF).  A connection
        that has not sent a request yet is left alone: its request may be on its way, and
        its answer (the drain's 503) could not be written after the half-close."""
        lingering = []
        for connection in list(self.server_state.connections):
            cycle = getattr(connection, "cycle", None)
            transport = getattr(connection, "transport", None)
            if cycle is not None and cycle.response_complete and transport is not None \
                    and not transport.is_closing() and transport.can_write_eof():
                transport.write_eof()
                lingering.append(connection)
        deadline = time.monotonic() + LINGER_S
        while time.monotonic() < deadline and not self.force_exit and any(
                c in self.server_state.connections for c in lingering):
            await asyncio.sleep(0.05)

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

"""Each served model's health, asked in the background: a dead model is refused at once.

The image runs the backend's own watch beside tritonserver, which restarts the server
when a model's engine or stub dies.  A frontend in front of any other Triton (the chart's
frontend-only mode, a user's own server) has no such watch: Triton's readiness does not
see a dead engine, so this frontend stayed ready and every request for the model went
all the way to Triton to learn that it cannot serve.

Every `interval` seconds each model the catalog serves is asked for its health (the vLLM
backend's health check: a request that generates nothing and travels the path of a
generation).  Each model is asked on its own, so a slow one delays no other's answer.  An
answer that says the model is dead (an error of the backend's kind ENGINE_DEAD for a dead
engine, Triton's "is not healthy" for a dead stub) counts at once; a check that times out or fails
otherwise counts only after MISSES in a row, since a busy model is not a dead one.  A
model that answers again is alive again.  While a model is dead, the catalog answers its
requests with a 503 and readiness names it (ModelCatalog.dead).  Nothing is added to a
request's path: these checks are the only extra traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from ..served_models.catalog import ModelCatalog
from ..triton.client import STUB_NOT_HEALTHY, TritonError
from ..triton.vllm_contract import ENGINE_DEAD

log = logging.getLogger("triton_openai")

MISSES = 3  # unanswered checks in a row that make a model dead (as the backend's watch)
# As long as the backend's watch waits: Triton answers for a dead stub only when it
# next tries to send it a request, which can take a second or two.
CHECK_TIMEOUT_S = 5.0


class ModelWatch:
    def __init__(self, ask: Callable[[str], Awaitable[None]], catalog: ModelCatalog,
                 registry: CollectorRegistry, interval: float,
                 timeout: float = CHECK_TIMEOUT_S,
                 on_dead: Callable[[str, str], None] | None = None):
        self._ask = ask
        # Called once per death, with the model and why (the in-process mode stops then).
        self._on_dead = on_dead
        self._catalog = catalog
        self._interval = interval
        self._timeout = timeout
        self._checks: dict[str, asyncio.Task] = {}  # Triton name -> its latest check
        self._misses: dict[str, int] = {}
        # Models whose server refused the check itself: not the vLLM backend's, or one
        # that predates the check.  Calling them dead would refuse every request.
        self._unasked: set[str] = set()
        self._healthy = Gauge("openai_frontend_model_healthy",
                              "1 while a served model answers its health check, 0 once it "
                              "cannot serve", ["model"], registry=registry)
        self._deaths = Counter("openai_frontend_model_deaths",
                               "Served models found unable to serve", ["model"],
                               registry=registry)

    async def run(self) -> None:
        """Until cancelled (the app's shutdown), which ends the checks in flight too."""
        try:
            while True:
                try:
                    await self._start_checks()
                except Exception as err:  # the watch must outlive any one failure
                    log.warning("model watch: %s", err)
                await asyncio.sleep(self._interval)
        finally:
            checks = list(self._checks.values())
            for name in list(self._checks):
                self._forget(name)
            if checks:  # each ends at once: its request is closed, not answered
                await asyncio.wait(checks, timeout=1)

    async def _start_checks(self) -> None:
        try:
            models = await self._catalog.list()
        except TritonError:
            return  # Triton cannot be reached: readiness says so already
        served = {m.triton_name for m in models}
        for name in (self._checks.keys() | self._unasked) - served:
            self._forget(name)
        for name in served - self._unasked:
            check = self._checks.get(name)
            if check is None or check.done():
                self._checks[name] = asyncio.ensure_future(self._check(name))

    async def _check(self, name: str) -> None:
        try:
            await asyncio.wait_for(self._ask(name), self._timeout)
        except TimeoutError:
            self._missed(name, f"no answer to its health check in {self._timeout:g} s")
        except TritonError as err:
            # The backend's kind for a dead engine (a model that is only unloading is
            # UNAVAILABLE); Triton writes a dead stub's error itself, with no kind.
            if err.kind == ENGINE_DEAD or STUB_NOT_HEALTHY in err.message:
                self._dead(name, err.message)
            elif err.status == 400:
                self._unasked.add(name)
                log.info("model %s does not take the vLLM backend's health check (%s): "
                         "not watched", name, err.message)
            else:
                self._missed(name, err.message)
        except Exception as err:
            self._missed(name, f"{type(err).__name__}: {err}")
        else:
            self._alive(name)

    def _alive(self, name: str) -> None:
        self._misses.pop(name, None)
        if self._catalog.dead.pop(name, None) is not None:
            log.warning("model %s answers its health check again: serving it", name)
        self._healthy.labels(name).set(1)

    def _missed(self, name: str, why: str) -> None:
        self._misses[name] = self._misses.get(name, 0) + 1
        if self._misses[name] >= MISSES:
            self._dead(name, f"{why} ({self._misses[name]} health checks in a row)")
        else:
            log.warning("model %s: %s (%d of %d)", name, why, self._misses[name], MISSES)

    def _dead(self, name: str, why: str) -> None:
        newly = name not in self._catalog.dead
        self._catalog.dead[name] = why
        self._healthy.labels(name).set(0)
        if newly:
            self._deaths.labels(name).inc()
            log.error("model %s cannot serve: %s; its requests are refused until it "
                      "answers its health check again", name, why)
            if self._on_dead is not None:
                self._on_dead(name, why)

    def _forget(self, name: str) -> None:
        """A model no longer served (or the watch stopping): nothing of it is kept."""
        check = self._checks.pop(name, None)
        if check is not None:
            check.cancel()
        self._misses.pop(name, None)
        self._catalog.dead.pop(name, None)
        self._unasked.discard(name)
        with contextlib.suppress(KeyError):
            self._healthy.remove(name)

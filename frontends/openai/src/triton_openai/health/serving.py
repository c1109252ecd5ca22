"""Readiness (Triton up, models served, alive and prepared, not shutting down) and the
metrics page."""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, generate_latest

from ..served_models.catalog import ModelCatalog
from ..shutdown import Drain
from ..triton.client import TritonClient, TritonError
from .warmup import Warmup

log = logging.getLogger("triton_openai")


class HealthServing:
    def __init__(self, client: TritonClient, catalog: ModelCatalog, registry: CollectorRegistry,
                 triton_metrics_url: str | None, warmup: Warmup | None = None,
                 drain: Drain | None = None):
        self.client = client
        self.catalog = catalog
        self.registry = registry
        self.triton_metrics_url = triton_metrics_url
        self.warmup = warmup
        self.drain = drain
        self._last_detail: str | None = None

    async def ready(self, required: Sequence[str] = ()) -> tuple[bool, str]:
        """Ready to serve, and serving each `required` model (a client name or Triton's).

        Triton's own readiness (strict, its default) already holds only while every
        model it loaded is READY; `required` also catches a model that is not there at
        all, which Triton does not know it should have.
        """
        if self.drain is not None and self.drain.draining:
            return False, "shutting down"
        if not await self.client.server_ready():
            return False, "Triton server is not ready"
        try:
            models = await self.catalog.list()
        except TritonError as err:
            self._note(f"Triton's model list: {err.message}")
            return False, "cannot list Triton's models"
        if not models:
            return False, "no model is loaded"
        names = {n for m in models for n in (m.id, m.triton_name)}
        missing = [name for name in required if name not in names]
        if missing:
            return False, f"not serving {', '.join(missing)} (not READY in Triton, or not vLLM's)"
        # Triton's readiness does not see a dead engine or stub: the model watch does
        # (and logs why; the answer, which anyone may read, only says which).
        dead = sorted({m.triton_name for m in models} & self.catalog.dead.keys())
        if dead:
            return False, "; ".join(f"model {name} cannot serve" for name in dead)
        if self.warmup is not None:
            waiting = self.warmup.pending(models)
            if waiting:
                return False, f"loading the tokenizer of {', '.join(waiting)}"
        self._last_detail = None
        return True, "ok"

    def _note(self, detail: str) -> None:
        """Log why readiness failed, once per reason rather than once per probe."""
        if detail != self._last_detail:
            self._last_detail = detail
            log.warning("not ready: %s", detail)

    async def prepare(self, interval: float = 0.25) -> None:
        """Check readiness until it holds, so that warm-up starts before the first probe."""
        while not (await self.ready())[0]:
            await asyncio.sleep(interval)

    def _fetch_triton(self) -> str:
        with urllib.request.urlopen(self.triton_metrics_url, timeout=3) as resp:
            return resp.read().decode("utf-8", errors="replace")

    async def metrics_text(self) -> str:
        """The frontend's own series, then Triton's (its vLLM series included)."""
        own = generate_latest(self.registry).decode()
        in_process = getattr(self.client, "metrics_text", None)
        if in_process is not None:  # a Triton in this process: its series, no page to fetch
            return own + in_process()
        if not self.triton_metrics_url:
            return own
        try:
            triton = await asyncio.to_thread(self._fetch_triton)
        except Exception as err:  # metrics must not fail because Triton's page did
            triton = f"# Triton metrics unavailable from {self.triton_metrics_url}: {err}\n"
        return own + triton

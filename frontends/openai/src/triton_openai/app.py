"""The application factory: state on `app.state`, one router per API surface."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.middleware.cors import CORSMiddleware

from .chat import router as chat_router
from .chat.serving import ChatServing
from .completions import router as completions_router
from .completions.serving import CompletionsServing
from .config import FrontendConfig
from .embeddings import router as embeddings_router
from .embeddings.serving import EmbeddingsServing
from .generation.service import GenerationService
from .health import router as health_router
from .health.model_watch import ModelWatch
from .health.serving import HealthServing
from .health.warmup import Warmup
from .models import router as models_router
from .models.serving import ModelsServing
from .responses_api import router as responses_router
from .responses_api.serving import ResponsesServing
from .served_models.catalog import ModelCatalog
from .served_models.sampling_defaults import SamplingDefaults
from .served_models.tokenizers import TokenizerCache
from .shutdown import Drain, DrainMiddleware
from .tokenization import router as tokenization_router
from .tokenization.serving import TokenizationServing
from .triton import TritonClient, TritonError, create_client
from .web import errors
from .web.access import AccessMiddleware
from .web.guards import ApiKeyMiddleware, BodyLimitMiddleware


def _stop_for(app: FastAPI):
    """With Triton in this process, a dead model stops the frontend: nothing here can
    load it again, and the orchestrator restarts a process that exits (status 4, as the
    image's model watch exits when it stops tritonserver)."""
    def stop(name: str, why: str) -> None:
        if app.state.dead_model is None:
            app.state.dead_model = f"{name}: {why}"
            os.kill(os.getpid(), signal.SIGTERM)
    return stop


async def _stop_if_triton_fails_to_start(wait_started) -> None:
    """A Triton in this process that could not start (a model failed to load) stops the
    frontend, as tritonserver exits then; `main()` exits EXIT_TRITON_FAILED.  The signal
    is sent from here, where the server that runs the app has its handler in place: the
    frontend may be a container's first process (PID 1), and the kernel drops a signal
    that PID 1 has no handler for."""
    try:
        await wait_started()
    except TritonError:
        os.kill(os.getpid(), signal.SIGTERM)


def build_app(config: FrontendConfig, client: TritonClient | None = None) -> FastAPI:
    """A ready-to-serve app; `client` replaces the Triton connection (tests pass fakes)."""
    if client is None:
        client = create_client(config.triton_url, config.in_process, config.api_key)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Connect to Triton and load what first requests need now, not on their path;
        # /health/ready says ok once this is done.  The libraries are imported at once,
        # while Triton may still be loading its models, in a daemon thread: a stop that
        # comes during the import must not wait seconds for it.
        threading.Thread(target=Warmup.import_libraries, name="import-libraries",
                         daemon=True).start()
        background = [asyncio.ensure_future(app.state.health.prepare())]
        if app.state.model_watch is not None:  # each model's health, until the shutdown
            background.append(asyncio.ensure_future(app.state.model_watch.run()))
        started = getattr(app.state.triton, "wait_started", None)
        if started is not None:  # Triton in this process, whose start may fail
            background.append(asyncio.ensure_future(_stop_if_triton_fails_to_start(started)))
        yield
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # The drain (shutdown/) has ended or cut every request before this runs.
        await app.state.generation.close()
        await app.state.triton.close()

    app = FastAPI(title="Triton OpenAI-compatible frontend", lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    registry = CollectorRegistry()
    catalog = ModelCatalog(client, config.served_model_names)
    drain = Drain()
    generation = GenerationService(client, catalog, TokenizerCache(config.tokenizer),
                                   SamplingDefaults(config.generation_config),
                                   config.compact_json, config.stream_feeds)

    app.state.config = config
    app.state.triton = client
    app.state.catalog = catalog
    app.state.generation = generation
    app.state.models = ModelsServing(catalog)
    app.state.completions = CompletionsServing(generation, config.max_batch_inputs)
    app.state.chat = ChatServing(generation, config.chat_template, config.tool_call_parser,
                                 config.reasoning_parser)
    app.state.responses = ResponsesServing(generation, config.chat_template,
                                           config.tool_call_parser, config.responses_store_size,
                                           config.reasoning_parser,
                                           config.max_background_responses, drain)
    app.state.embeddings = EmbeddingsServing(client, catalog, config.max_batch_inputs)
    app.state.tokenization = TokenizationServing(generation, config.chat_template)
    app.state.drain = drain
    # A client written to the TritonClient protocol before it had model_health (a user's
    # own transport) has no way to ask: then nothing is watched.
    ask = getattr(client, "model_health", None)
    app.state.dead_model = None
    app.state.model_watch = (ModelWatch(ask, catalog, registry, config.model_health_interval,
                                        on_dead=_stop_for(app) if config.in_process else None)
                             if ask is not None and config.model_health_interval > 0 else None)
    app.state.health = HealthServing(client, catalog, registry, config.triton_metrics_url,
                                     Warmup(generation, config.chat_template), drain)

    for surface in (models_router, completions_router, chat_router, responses_router,
                    embeddings_router, tokenization_router, health_router):
        surface.attach_router(app)
    errors.install_handlers(app)

    # add_middleware wraps: the last added runs first.  The key is checked before a
    # chunked body is read (BodyLimitMiddleware reads one whole).
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_request_bytes)
    if config.api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=config.api_key)
    if config.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=config.cors_origins,
                           allow_methods=["GET", "POST", "OPTIONS"],
                           allow_headers=["authorization", "content-type", "x-request-id"],
                           expose_headers=["x-request-id"])
    app.add_middleware(DrainMiddleware, drain=drain)
    app.add_middleware(AccessMiddleware, registry=registry, log_format=config.log_format)
    return app

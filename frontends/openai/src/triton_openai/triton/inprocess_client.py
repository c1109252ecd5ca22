"""Triton in the frontend's own process, through its C API (`capi.py`).

Why: over KServe gRPC or HTTP every streamed token is encoded by tritonserver, sent
over a socket and parsed again here, by two processes.  In-process, the backend's
response reaches this process's memory once, and a callback hands its outputs to the
event loop; no tritonserver process, no socket, no parse.  The backends still run as
Triton runs them (the vLLM backend's stub is its own process either way).

Threads: Triton calls its response callbacks on its own threads.  They are C
(`_capi_shim.c`): they copy a response's outputs into a record, free the response and
queue the record, and wake the event loop through an eventfd when the queue was empty.
The loop takes every queued record at once, so a consumer that lags reads several
responses together (InferResponse.more).  No Python runs on Triton's threads (written
as ctypes callbacks, each would wait for the interpreter's lock that the loop holds).
Blocking calls (the server's start and stop, which load and unload models) run in
threads, never on the loop.

Start and stop: the server starts (its models load) in a thread of its own while the
frontend already answers its health probes.  A start that fails, for any reason, ends
"starting" with its error: `wait_started` raises it, and the app stops the process with
it.  A stop while the models still load does not wait for them (Triton cannot cancel a
load): the process may exit at once, as tritonserver stops on SIGTERM during a load.

KServe endpoints: none in this mode; a deployment that needs them runs tritonserver
and points the frontend at it (--triton-url).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import json
import logging
import struct
import threading
from collections import deque
from collections.abc import AsyncIterator
from ctypes import byref, c_bool, c_char_p, c_int64, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass

from . import capi
from .client import AbortTasks, InferResponse, ModelInfo, Tensor, TritonError, model_error
from .vllm_contract import ABORT_PARAMETER, HEALTH_PARAMETER

log = logging.getLogger("triton_openai.triton")

_MODEL_CONTROL = {"none": capi.MODEL_CONTROL_NONE, "poll": capi.MODEL_CONTROL_POLL,
                  "explicit": capi.MODEL_CONTROL_EXPLICIT}


@dataclass(frozen=True)
class ServerSettings:
    """What tritonserver's flags would say, for the server in this process."""

    model_repository: str
    backend_directory: str = f"{capi.DEFAULT_HOME}/backends"
    repoagent_directory: str = f"{capi.DEFAULT_HOME}/repoagents"
    model_control_mode: str = "none"
    load_models: tuple[str, ...] = ()  # with "explicit": the models loaded at start
    exit_timeout_s: int = 30
    log_info: bool = False
    log_verbose: int = 0
    metrics: bool = True
    # (backend, setting, value), as tritonserver's --backend-config=backend,setting=value
    backend_config: tuple[tuple[str, str, str], ...] = ()
    library: str | None = None  # libtritonserver.so; default capi.library_path()
    strict_readiness: bool = True


def parse_backend_config(value: str) -> tuple[str, str, str]:
    """`backend,setting=value`, as tritonserver's --backend-config takes it."""
    backend, sep, rest = value.partition(",")
    setting, eq, setting_value = rest.partition("=")
    if not sep or not eq or not backend or not setting:
        raise ValueError(f"{value!r}: give BACKEND,SETTING=VALUE")
    return backend, setting, setting_value


class _Stream:
    """One request's responses, as the event loop receives them."""

    __slots__ = ("items", "waiter", "request", "released", "keep")

    def __init__(self, keep: list):
        self.items: deque = deque()
        self.waiter: asyncio.Future | None = None
        self.request: int | None = None
        self.released = False
        self.keep = keep  # input buffers Triton reads until it releases the request

    def push(self, item) -> None:
        self.items.append(item)
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_items(self) -> deque:
        if not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.items


_RECORD = struct.Struct("=QIIiI")  # key, kind, flags, error code, error length
_RESPONSE, _RELEASED = 0, 1


def read_records(data: bytes):
    """(key, kind, flags, outputs or TritonError or None) of each record that
    `_capi_shim.c`'s shim_take returned."""
    offset, end = 0, len(data)
    unpack_from = struct.unpack_from
    while offset < end:
        (size,) = unpack_from("=Q", data, offset)
        offset += 8
        record_end = offset + size
        key, kind, flags, code, message_len = _RECORD.unpack_from(data, offset)
        offset += _RECORD.size
        if code >= 0:
            message = data[offset:offset + message_len].decode("utf-8", errors="replace")
            name = capi.ERROR_CODES[code] if code < len(capi.ERROR_CODES) else "UNKNOWN"
            yield key, kind, flags, model_error(message, capi.CapiError(name, message).status)
            offset = record_end
            continue
        offset += message_len
        (count,) = unpack_from("=I", data, offset)
        offset += 4
        outputs = {} if kind == _RESPONSE and count else None
        for _ in range(count):
            (name_len,) = unpack_from("=I", data, offset)
            offset += 4
            name = data[offset:offset + name_len].decode()
            offset += name_len
            datatype, dims = unpack_from("=iI", data, offset)
            offset += 8
            shape = unpack_from(f"={dims}q", data, offset)
            offset += 8 * dims
            (byte_size,) = unpack_from("=Q", data, offset)
            offset += 8
            outputs[name] = Tensor(name, capi.DATATYPES[datatype], shape,
                                   data[offset:offset + byte_size])
            offset += byte_size
        yield key, kind, flags, outputs
        offset = record_end


def _shim_path() -> str:
    try:
        from . import _capi_shim
    except ImportError as err:
        raise capi.CapiError("UNAVAILABLE", "Triton in this process needs the frontend's "
                             f"compiled callbacks (_capi_shim), which this install lacks "
                             f"(built without a C compiler?): {err}") from None
    return _capi_shim.__file__


class InProcessTritonClient:
    """The TritonClient protocol, served by a Triton that runs in this process."""

    carries_feeds = True

    def __init__(self, settings: ServerSettings):
        self.settings = settings
        self._capi = capi.load(settings.library)
        self._server: int | None = None
        self._start_error: str | None = None
        self._stopped = False
        # The start's end, for the loops that wait for it (wait_started); guards _stopped
        # against a start that ends while a stop begins.
        self._start_lock = threading.Lock()
        self._start_waiters: list = []
        # key -> stream: until its final response, and until Triton releases its request.
        self._streams: dict[int, _Stream] = {}
        self._unreleased: dict[int, _Stream] = {}
        self._ids = itertools.count(1)
        self._aborts = AbortTasks()
        shim = ctypes.PyDLL(_shim_path())  # short calls: the lock is kept (capi.BLOCKING)
        lib = self._capi.lib
        self._wake_fd = shim.shim_init(*(
            ctypes.cast(getattr(lib, f"TRITONSERVER_{name}"), c_void_p)
            for name in ("InferenceResponseError", "InferenceResponseOutputCount",
                         "InferenceResponseOutput", "InferenceResponseDelete",
                         "ErrorMessage", "ErrorCode", "ErrorDelete", "ErrorNew")))
        if self._wake_fd < 0:
            raise capi.CapiError("INTERNAL", "could not make the eventfd that wakes the loop")
        shim.shim_take.restype = c_void_p
        shim.shim_take.argtypes = [ctypes.POINTER(c_uint64)]
        shim.shim_free.argtypes = [c_void_p]
        self._shim = shim
        self._response_fn = ctypes.cast(shim.shim_response, c_void_p)
        self._request_release_fn = ctypes.cast(shim.shim_request_released, c_void_p)
        allocator = c_void_p()
        self._capi.ResponseAllocatorNew(byref(allocator), ctypes.cast(shim.shim_alloc, c_void_p),
                                        ctypes.cast(shim.shim_release, c_void_p), None)
        self._allocator = allocator.value
        self._reading: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        threading.Thread(target=self._start, name="triton-start", daemon=True).start()

    # --- the server's life --------------------------------------------------------
    def _options(self) -> int:
        c, s = self._capi, self.settings
        opts = c_void_p()
        c.ServerOptionsNew(byref(opts))
        o = opts.value
        c.ServerOptionsSetServerId(o, b"triton")
        c.ServerOptionsSetModelRepositoryPath(o, s.model_repository.encode())
        c.ServerOptionsSetModelControlMode(o, _MODEL_CONTROL[s.model_control_mode])
        for name in s.load_models:
            c.ServerOptionsSetStartupModel(o, name.encode())
        c.ServerOptionsSetStrictModelConfig(o, False)  # tritonserver's default
        c.ServerOptionsSetStrictReadiness(o, s.strict_readiness)
        c.ServerOptionsSetExitTimeout(o, s.exit_timeout_s)
        c.ServerOptionsSetBackendDirectory(o, s.backend_directory.encode())
        c.ServerOptionsSetRepoAgentDirectory(o, s.repoagent_directory.encode())
        c.ServerOptionsSetLogInfo(o, s.log_info)
        c.ServerOptionsSetLogWarn(o, True)
        c.ServerOptionsSetLogError(o, True)
        c.ServerOptionsSetLogVerbose(o, s.log_verbose)
        c.ServerOptionsSetMetrics(o, s.metrics)
        c.ServerOptionsSetGpuMetrics(o, False)
        c.ServerOptionsSetCpuMetrics(o, False)
        for backend, setting, value in s.backend_config:
            c.ServerOptionsSetBackendConfig(o, backend.encode(), setting.encode(), value.encode())
        return o

    def _start(self) -> None:
        """Make the server (it loads the models: seconds to minutes) off the event loop.
        Whatever goes wrong ends the start with an error: never "starting" for ever."""
        error = None
        try:
            self._make_server()
        except capi.CapiError as err:
            error = err.message
            log.error("Triton could not start in this process: %s", error)
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
            log.exception("Triton could not start in this process")
        with self._start_lock:
            self._start_error = error
            self._started.set()
            waiters, self._start_waiters = self._start_waiters, []
        for wake in waiters:
            wake()

    def _make_server(self) -> None:
        opts = self._options()
        try:
            server = c_void_p()
            self._capi.ServerNew(byref(server), opts)
        finally:
            self._capi.ServerOptionsDelete(opts)
        with self._start_lock:
            stopped = self._stopped
            if not stopped:
                self._server = server.value
        if stopped:  # the process stopped during the load, and may still be here
            log.info("Triton finished loading after the stop began: stopping it")
            self._stop_server(server.value)
            return
        log.info("Triton (in process, %s) serving %s", self._capi.path,
                 self.settings.model_repository)

    @property
    def start_error(self) -> str | None:
        """Why the server did not start (None while it starts, and once it has)."""
        return self._start_error

    async def wait_started(self) -> None:
        """Returns once the server is up; raises TritonError with the reason when it
        could not start."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def wake() -> None:  # on the start's thread
            with contextlib.suppress(RuntimeError):  # the loop closed since: no one waits
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))
        with self._start_lock:
            if self._started.is_set():
                done.set_result(None)
            else:
                self._start_waiters.append(wake)
        try:
            await done
        finally:  # a waiter that went away (cancelled) is not woken on a closed loop
            with self._start_lock:
                if wake in self._start_waiters:
                    self._start_waiters.remove(wake)
        if self._start_error is not None:
            raise TritonError(self._start_error, 503)

    def _live_server(self) -> int:
        if self._server is None or self._stopped:
            raise TritonError(self._start_error or "Triton is starting", 503)
        return self._server

    async def close(self) -> None:
        await self._aborts.wait()
        await asyncio.to_thread(self._stop)
        if self._reading is not None:
            self._reading.remove_reader(self._wake_fd)
            self._reading = None

    def _stop(self) -> None:
        with self._start_lock:
            if self._stopped:
                return
            self._stopped = True
            server, self._server = self._server, None
            loading = not self._started.is_set()
        if loading:
            # Triton cannot cancel a load, which takes minutes: waiting for it would hold
            # the stop until the orchestrator kills the process.  _make_server stops the
            # server if the process is still here when the load ends.
            log.warning("stopped while Triton was loading its models: not waiting for them")
        elif server is not None:
            self._stop_server(server)

    def _stop_server(self, server: int) -> None:
        # ServerStop unloads the models and waits for their requests (exit timeout).
        try:
            self._capi.ServerStop(server)
        except capi.CapiError as err:
            log.warning("Triton stopped with an error: %s", err.message)
        self._capi.ServerDelete(server)

    # --- the index and health -------------------------------------------------------
    async def server_ready(self) -> bool:
        if self._server is None or self._stopped:
            return False
        ready = c_bool()
        try:
            self._capi.ServerIsReady(self._server, byref(ready))
        except capi.CapiError:
            return False
        return ready.value

    def _json(self, call, *args) -> dict | list:
        message = c_void_p()
        try:
            call(*args, byref(message))
        except capi.CapiError as err:
            raise model_error(err.message, err.status) from None
        return json.loads(self._capi.message_json(message.value))

    async def list_models(self) -> list[ModelInfo]:
        server = self._live_server()
        models = []
        for entry in self._json(self._capi.ServerModelIndex, server, 0):
            ready = entry.get("state") == "READY"
            params: dict[str, str] = {}
            backend, outputs = "", ()
            if ready:
                config = self._json(self._capi.ServerModelConfig, server,
                                    entry["name"].encode(), -1, 1)
                params = {k: v.get("string_value", "")
                          for k, v in config.get("parameters", {}).items()}
                backend = config.get("backend", "")
                outputs = tuple(o["name"] for o in config.get("output", []))
            models.append(ModelInfo(entry["name"], str(entry.get("version", "")), ready,
                                    params, backend, outputs))
        return models

    def metrics_text(self) -> str:
        """Triton's Prometheus series (what tritonserver serves on :8002/metrics)."""
        if self._server is None or self._stopped or not self.settings.metrics:
            return ""
        metrics = c_void_p()
        self._capi.ServerMetrics(self._server, byref(metrics))
        try:
            base, size = c_char_p(), c_size_t()
            self._capi.MetricsFormatted(metrics.value, capi.METRIC_PROMETHEUS,
                                        byref(base), byref(size))
            return ctypes.string_at(base, size.value).decode("utf-8", errors="replace")
        finally:
            self._capi.MetricsDelete(metrics.value)

    # --- inference ------------------------------------------------------------------
    def _submit(self, model: str, request_id: str, inputs: list[Tensor], outputs: list[str],
                parameters: dict[str, bool | str]) -> _Stream:
        c, server = self._capi, self._live_server()
        req = c_void_p()
        try:
            c.InferenceRequestNew(byref(req), server, model.encode(), -1)
        except capi.CapiError as err:
            raise model_error(err.message, err.status) from None
        request = req.value
        if self._reading is None:
            self._reading = asyncio.get_running_loop()
            self._reading.add_reader(self._wake_fd, self._take)
        keep: list = []
        stream = _Stream(keep)
        key = next(self._ids)
        try:
            c.InferenceRequestSetId(request, request_id.encode())
            for name, value in parameters.items():
                if isinstance(value, bool):
                    c.InferenceRequestSetBoolParameter(request, name.encode(), value)
                else:
                    c.InferenceRequestSetStringParameter(request, name.encode(), value.encode())
            for tensor in inputs:
                name = tensor.name.encode()
                shape = (c_int64 * len(tensor.shape))(*tensor.shape)
                c.InferenceRequestAddInput(request, name, capi.DATATYPE_CODES[tensor.datatype],
                                           shape, len(tensor.shape))
                keep.append(tensor.data)
                c.InferenceRequestAppendInputData(request, name, tensor.data, len(tensor.data),
                                                  capi.MEMORY_CPU, 0)
            for name in outputs:
                c.InferenceRequestAddRequestedOutput(request, name.encode())
            c.InferenceRequestSetReleaseCallback(request, self._request_release_fn, key)
            c.InferenceRequestSetResponseCallback(request, self._allocator, None,
                                                  self._response_fn, key)
            self._streams[key] = self._unreleased[key] = stream
            stream.request = request
            c.ServerInferAsync(server, request, None)
        except capi.CapiError as err:
            # Not accepted: the request is still ours to free.
            self._streams.pop(key, None)
            self._unreleased.pop(key, None)
            c.InferenceRequestDelete(request)
            raise model_error(err.message, err.status) from None
        return stream

    def _cancel(self, stream: _Stream) -> None:
        # The loop deletes a request once Triton released it (_take): never before this.
        if not stream.released:
            try:
                self._capi.InferenceRequestCancel(stream.request)
            except capi.CapiError as err:
                log.debug("cancel failed: %s", err.message)

    def stream_infer(
        self, model: str, inputs: list[Tensor], outputs: list[str], request_id: str,
        parameters: dict[str, str] | None = None,
    ) -> AsyncIterator[InferResponse]:
        return self._responses(model, request_id, inputs, outputs, dict(parameters or {}),
                               abort=True)

    async def _responses(self, model: str, request_id: str, inputs: list[Tensor],
                         outputs: list[str], parameters: dict, *, abort: bool
                         ) -> AsyncIterator[InferResponse]:
        """One request's responses, until the final one.  A caller that goes away
        cancels the request in Triton; with `abort`, the backend is told at once as well
        (its cancellation poll is slower)."""
        stream = self._submit(model, request_id, inputs, outputs, parameters)
        ended = False
        try:
            while True:
                items = await stream.next_items()
                while items:
                    out, final = items.popleft()
                    ended = final or isinstance(out, TritonError)
                    if isinstance(out, TritonError):
                        raise out
                    if out is not None or final:
                        yield InferResponse(out or {}, final, more=bool(items))
                    if final:
                        return
        finally:
            if not ended:
                self._cancel(stream)
                if abort:
                    self._aborts.start(self._abort(model, request_id))

    async def _unary(self, model: str, request_id: str, parameters: dict) -> None:
        """A request that the backend answers with an empty final response, or an error."""
        async for _ in self._responses(model, request_id, [], [], parameters, abort=False):
            pass

    async def _abort(self, model: str, request_id: str) -> None:
        try:
            await asyncio.wait_for(self._unary(model, f"{request_id}:abort",
                                               {ABORT_PARAMETER: request_id}), 10)
        except (TimeoutError, TritonError) as err:
            log.debug("request %s: abort refused: %s", request_id, err)

    async def model_health(self, model: str) -> None:
        await self._unary(model, "health-check", {HEALTH_PARAMETER: True})

    # --- what Triton's callbacks queued (_capi_shim.c), on the loop ------------------
    def _take(self) -> None:
        size = c_uint64()
        buffer = self._shim.shim_take(byref(size))
        if not buffer:
            return
        try:
            data = ctypes.string_at(buffer, size.value)
        finally:
            self._shim.shim_free(buffer)
        for key, kind, flags, out in read_records(data):
            if kind == _RELEASED:
                if not flags & capi.REQUEST_RELEASE_ALL:
                    continue
                stream = self._unreleased.pop(key, None)
                if stream is not None:
                    stream.released = True
                    stream.keep.clear()
                    self._capi.InferenceRequestDelete(stream.request)
                continue
            final = bool(flags & capi.RESPONSE_COMPLETE_FINAL)
            stream = self._streams.pop(key, None) if final else self._streams.get(key)
            if stream is not None:
                stream.push((out, final))

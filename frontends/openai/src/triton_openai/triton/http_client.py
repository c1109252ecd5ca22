"""Triton's HTTP endpoint as a transport: `generate_stream` for inference, v2 JSON for the rest.

Why offer it beside KServe gRPC: per streamed response, grpcio's asyncio stack costs the
frontend about twice the CPU of reading an SSE event from a socket (`bench/bench_openai.py`
reports the frontend's CPU per token over each), and where the frontend shares CPUs with
the engine, every cycle it spends per token is taken from generation.  Events that
arrived together are also read in one go.

The client keeps a pool of keep-alive HTTP/1.1 connections, one request on each at a
time; responses are parsed by httptools (llhttp, the parser uvicorn uses).  Closing a
stream early closes its connection, which makes Triton cancel the request.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import quote, urlsplit

import httptools
import msgspec

from .client import (
    AbortTasks,
    InferResponse,
    ModelInfo,
    Tensor,
    TritonError,
    Values,
    model_error,
)
from .credentials import Headers, TritonCredentials
from .vllm_contract import ABORT_PARAMETER, HEALTH_PARAMETER

log = logging.getLogger("triton_openai.triton")

_decode = msgspec.json.decode
_encode = msgspec.json.Encoder().encode
_HEALTH_BODY = _encode({"parameters": {HEALTH_PARAMETER: True}})

# Fields of a generate response that are not model outputs.
_RESPONSE_FIELDS = frozenset({"model_name", "model_version", "id", "parameters"})
_MAX_IDLE = 256  # idle keep-alive connections kept for reuse
_CONNECT_TIMEOUT_S = 10.0
_UNARY_TIMEOUT_S = 10.0


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection to Triton, carrying one request at a time."""

    def __init__(self, host_header: str) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._host_header = host_header
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.keep_alive = True
        self.received = False  # any byte of the current response
        self.complete = False
        self.error: TritonError | None = None
        self._body = bytearray()
        self._events: deque[bytes] = deque()
        self._partial = b""
        self._stream = False
        self._waiter: asyncio.Future | None = None

    # --- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # never asked for; treat as malformed
            self._fail(TritonError("Triton answered with a protocol upgrade", 500))
        except httptools.HttpParserError as err:
            self._fail(TritonError(f"malformed HTTP response from Triton: {err}", 500))
        self._wake()

    def connection_lost(self, exc) -> None:
        self.closed = True
        if not self.complete and self.error is None:
            self.error = TritonError("the connection to Triton closed before the response "
                                     "ended", 503 if not self.received else 500)
        self._wake()

    # --- httptools callbacks ------------------------------------------------------
    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if not (self._stream and self.status == 200):
            self._body += body
            return
        # Server-sent events: `data: {json}` blocks separated by blank lines.
        parts = (self._partial + body).split(b"\n\n")
        self._partial = parts.pop()
        for part in parts:
            if part.startswith(b"data: "):
                self._events.append(part[6:])
            elif part.startswith(b"data:"):
                self._events.append(part[5:])

    def on_message_complete(self) -> None:
        self.complete = True

    # --- used by the client -------------------------------------------------------
    def _fail(self, err: TritonError) -> None:
        self.error = err
        self.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, method: str, path: str, body: bytes | None, stream: bool,
             headers: Headers = ()) -> None:
        self._reset()
        self._stream = stream
        head = f"{method} {path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers)
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.transport.write(head.encode("latin-1") + b"\r\n" + (body or b""))

    async def _wait(self, ready) -> None:
        """Until ready(), the response ended, or the connection failed."""
        while not ready() and not self.complete and self.error is None:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def headers(self) -> None:
        await self._wait(lambda: self.status != 0)
        if self.status == 0:
            raise self.error or TritonError("Triton sent no response", 500)

    async def events(self) -> list[bytes]:
        """The SSE payloads received since the last call; [] once the response ended."""
        await self._wait(lambda: self._events)
        if self._events:
            out = list(self._events)
            self._events.clear()
            return out
        if self.error is not None:
            raise self.error
        return []

    async def body(self) -> bytes:
        await self._wait(lambda: False)
        if not self.complete:
            raise self.error
        return bytes(self._body)

    @property
    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.closed and self.error is None


def _json_value(tensor: Tensor):
    values = tensor.as_list()
    return values[0] if tensor.shape == (1,) else values


def _error_message(body: bytes) -> str:
    """The text of Triton's error answer: `{"error": ...}`, which generate_stream sends
    as an event (`data: {"error": ...}`) even when its status says the request failed."""
    payload = body.strip()
    if payload.startswith(b"data:"):
        payload = payload[5:].split(b"\n", 1)[0].strip()  # the first event's data line
    try:
        return str(_decode(payload).get("error") or body.decode(errors="replace"))
    except (msgspec.DecodeError, AttributeError):
        return body.decode(errors="replace")


def _status_error(status: int, body: bytes) -> TritonError:
    # 403: a restricted API refused this frontend's key, a fault of the deployment's.
    return model_error(_error_message(body), 503 if status == 503 else 500 if status == 403
                       else 400 if 400 <= status < 500 else 500)


class HttpTritonClient:
    # A feed's records come as one JSON array of strings per engine step: one parse (in
    # msgspec) for all the streams of the step, not one per stream and token.
    carries_feeds = True

    def __init__(self, url: str, credentials: TritonCredentials | None = None):
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not an http://HOST:PORT URL: {url!r}")
        self.url = url
        credentials = credentials or TritonCredentials()
        self._repository_headers = credentials.repository_headers()
        self._inference_headers = credentials.inference_headers()
        self._host = parts.hostname
        self._port = parts.port or 80
        self._host_header = parts.netloc
        self._idle: list[_Connection] = []
        self._aborts = AbortTasks()
        self._address: tuple | None = None  # (family, sockaddr) Triton's name resolved to
        self._lookup: asyncio.Future | None = None  # the lookup under way, if any

    async def _resolve(self) -> tuple:
        """Triton's address, looked up once and kept until a connection to it fails.

        A lookup per connection costs a DNS round trip each time the pool grows, and
        on a busy node the resolver (Docker's embedded one, a cluster's DNS) has taken
        longer than the connect timeout: new connections then failed while the server
        itself was answering the ones already open.  Connections opened together share
        one lookup rather than queueing one each on the executor's few threads."""
        if self._address is not None:
            return self._address
        if self._lookup is None:
            self._lookup = asyncio.ensure_future(self._look_up())
            self._lookup.add_done_callback(self._lookup_done)
        return await asyncio.shield(self._lookup)

    async def _look_up(self) -> tuple:
        infos = await asyncio.get_running_loop().getaddrinfo(
            self._host, self._port, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"{self._host} has no address")
        family, _, _, _, sockaddr = infos[0]
        return family, sockaddr

    def _lookup_done(self, lookup: asyncio.Future) -> None:
        self._lookup = None
        if not lookup.cancelled() and lookup.exception() is None:
            self._address = lookup.result()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        # What was being waited for when the time ran out: the message says which.
        step = f"no address for {self._host} in {_CONNECT_TIMEOUT_S:g} s"
        try:
            family, sockaddr = await asyncio.wait_for(self._resolve(), _CONNECT_TIMEOUT_S)
            step = f"no connection to {sockaddr[0]} in {_CONNECT_TIMEOUT_S:g} s"
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, sockaddr), _CONNECT_TIMEOUT_S)
                _, conn = await loop.create_connection(
                    lambda: _Connection(self._host_header), sock=sock)
            except BaseException:
                sock.close()
                raise
        except (TimeoutError, OSError) as err:
            self._address = None  # looked up again next time: the Service may have moved
            why = str(err) or step
            raise TritonError(f"cannot reach Triton at {self._host}:{self._port}: {why}",
                              503) from None
        return conn

    async def _open(self, method: str, path: str, body: bytes | None,
                    stream: bool, headers: Headers = ()) -> _Connection:
        """A connection with the request sent and the response's headers in.

        Closed if anything (a caller's cancellation too) interrupts the wait: Triton
        sends the headers of a generate_stream response with its first response, so a
        non-streamed generation is under way while this waits.
        """
        while self._idle:
            conn = self._idle.pop()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            try:
                conn.send(method, path, body, stream, headers)
                await conn.headers()
                return conn
            except TritonError:
                conn.close()
                # A kept-alive connection the server had closed: it answered nothing, so
                # the request goes again on a new connection.
                if conn.received:
                    raise
            except BaseException:
                conn.close()
                raise
        conn = await self._connect()
        try:
            conn.send(method, path, body, stream, headers)
            await conn.headers()
        except BaseException:
            conn.close()
            raise
        return conn

    def _release(self, conn: _Connection) -> None:
        if conn.reusable and len(self._idle) < _MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()

    async def _unary(self, method: str, path: str, body: dict | None = None,
                     headers: Headers = ()) -> tuple[int, bytes]:
        data = _encode(body) if body is not None else None
        conn = None
        try:
            conn = await asyncio.wait_for(self._open(method, path, data, False, headers),
                                          _UNARY_TIMEOUT_S)
            reply = await asyncio.wait_for(conn.body(), _UNARY_TIMEOUT_S)
        except TimeoutError:
            if conn is not None:
                conn.close()
            raise TritonError(f"Triton did not answer {method} {path} in time", 503) from None
        self._release(conn)
        return conn.status, reply

    async def server_ready(self) -> bool:
        try:
            status, _ = await self._unary("GET", "/v2/health/ready")
        except TritonError:
            return False
        return status == 200

    async def list_models(self) -> list[ModelInfo]:
        status, body = await self._unary("POST", "/v2/repository/index", {"ready": False},
                                         self._repository_headers)
        if status != 200:
            raise _status_error(status, body)
        models = []
        for entry in _decode(body):
            name = entry["name"]
            ready = entry.get("state") == "READY"
            params: dict[str, str] = {}
            backend, outputs = "", ()
            if ready:
                status, body = await self._unary("GET", f"/v2/models/{quote(name)}/config")
                if status != 200:
                    raise _status_error(status, body)
                cfg = _decode(body)
                params = {k: (v or {}).get("string_value", "")
                          for k, v in (cfg.get("parameters") or {}).items()}
                backend = cfg.get("backend", "")
                outputs = tuple(o["name"] for o in cfg.get("output") or ())
            models.append(ModelInfo(name, str(entry.get("version") or ""), ready, params,
                                    backend, outputs))
        return models

    async def stream_infer(
        self, model: str, inputs: list[Tensor], outputs: list[str], request_id: str,
        parameters: dict[str, str] | None = None,
    ) -> AsyncIterator[InferResponse]:
        # The generate extension takes inputs as JSON fields and returns every output the
        # model produced (the vLLM backend produces the ones its return_* inputs ask for).
        del outputs
        body: dict = {"id": request_id}
        if parameters:
            body["parameters"] = dict(parameters)
        for tensor in inputs:
            body[tensor.name] = _json_value(tensor)
        path = f"/v2/models/{quote(model)}/generate_stream"
        conn = None
        ended = False  # the server ended the request (last event, or an error), or never had it
        try:
            try:
                conn = await self._open("POST", path, _encode(body), True,
                                        self._inference_headers)
            except TritonError:
                ended = True
                raise
            if conn.status != 200:
                ended = True
                raise _status_error(conn.status, await conn.body())
            while True:
                events = await conn.events()
                if not events:
                    ended = True
                    yield InferResponse({}, True)
                    return
                last = len(events) - 1
                for i, payload in enumerate(events):
                    event = _decode(payload)
                    if "error" in event:
                        ended = True
                        raise model_error(str(event["error"]))
                    yield InferResponse({k: Values(v) for k, v in event.items()
                                         if k not in _RESPONSE_FIELDS}, False, i < last)
        except msgspec.DecodeError as err:
            raise TritonError(f"Triton sent an event that is not JSON: {err}", 500) from None
        finally:
            if conn is not None and ended and conn.reusable:
                self._release(conn)
            else:
                # The caller went away (or the stream broke): dropping the connection
                # makes Triton cancel the request, and the abort request says it again
                # where a proxy in between keeps the connection to Triton open.
                if conn is not None:
                    conn.close()
                if not ended:
                    log.debug("request %s: stream closed early", request_id)
                    self._aborts.start(self._abort(model, request_id))

    async def _abort(self, model: str, request_id: str) -> None:
        body = {"id": f"{request_id}:abort", "parameters": {ABORT_PARAMETER: request_id}}
        path = f"/v2/models/{quote(model)}/generate_stream"
        try:
            conn = await asyncio.wait_for(
                self._open("POST", path, _encode(body), True, self._inference_headers),
                _UNARY_TIMEOUT_S)
            try:
                if conn.status != 200:
                    log.debug("request %s: abort refused: %s", request_id,
                              _error_message(await conn.body()))
                else:
                    while await conn.events():
                        pass
            finally:
                self._release(conn)
        except (TimeoutError, TritonError) as err:
            log.debug("request %s: abort failed: %r", request_id, err)

    async def model_health(self, model: str) -> None:
        """The vLLM backend's health check, on Triton's `generate` endpoint: returns when
        the model can serve, raises TritonError with its answer when not."""
        conn = await self._open("POST", f"/v2/models/{quote(model)}/generate", _HEALTH_BODY,
                                False, self._inference_headers)
        try:
            reply = await conn.body()
        except BaseException:
            conn.close()  # the caller gave up waiting: the connection cannot be reused
            raise
        self._release(conn)
        # Triton answers a model's error with a 400 whatever its kind; model_error reads it.
        if conn.status != 200 or b'"error"' in reply:
            raise _status_error(conn.status, reply)

    async def close(self) -> None:
        await self._aborts.wait()
        for conn in self._idle:
            conn.close()
        self._idle.clear()

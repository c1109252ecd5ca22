"""Pure ASGI middlewares (cheaper per request than Starlette's BaseHTTPMiddleware).

Order, outermost first: access log + metrics, API key, body size limit.
"""

from __future__ import annotations

import hmac
import json
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from . import request_ids
from .errors import AuthenticationError, BadRequestError, RequestTooLargeError, internal_error
from .log_text import printable

access_log = logging.getLogger("triton_openai.access")


async def _send_error(send, err) -> None:
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if err.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# The API and the tokenizer endpoints; health and metrics stay open for probes and scrapers.
_PROTECTED = ("/v1/", "/tokenize", "/detokenize")


class ApiKeyMiddleware:
    """Bearer key on /v1/* and the tokenizer endpoints."""

    def __init__(self, app, api_key: str):
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send):
        if (scope["type"] == "http" and scope["path"].startswith(_PROTECTED)
                and scope["method"] != "OPTIONS"):
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                msg = ("Missing API key: send it as `Authorization: Bearer KEY`." if not got
                       else "Incorrect API key provided.")
                return await _send_error(send, AuthenticationError(msg))
        return await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """413 for bodies over the limit, by Content-Length or, without one (chunked), by
    reading the body first.

    A chunked body is read whole here, up to the limit, before the app sees any of it:
    an error raised from inside the app's reading would reach FastAPI's body parsing,
    which turns every failure there into a 400.  The app then gets the body in one
    message; what it receives after that (a disconnect) comes from the connection.
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    def _error(self):
        return RequestTooLargeError(f"Request body is larger than {self.max_bytes} bytes.")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None:
            # h11 has checked that it is a number, and reads no more than it says.
            if length.isdigit() and int(length) > self.max_bytes:
                return await _send_error(send, self._error())
            return await self.app(scope, receive, send)
        if headers.get(b"transfer-encoding") is None:
            return await self.app(scope, receive, send)  # no body at all
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client left while sending: nobody to answer
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                return await _send_error(send, self._error())
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


class AccessMiddleware:
    """One access-log line and the request metrics per request, when the response ends;
    the request's ids (request_ids.py) made and set for the request, the client's
    `X-Request-Id` (or, without one, the internal id) on the response."""

    def __init__(self, app, registry: CollectorRegistry, log_format: str = "text"):
        self.app = app
        self.json = log_format == "json"
        self.requests = Counter("openai_frontend_requests", "HTTP requests by route and status",
                                ["method", "path", "status"], registry=registry)
        self.latency = Histogram("openai_frontend_request_duration_seconds",
                                 "Time from request to the end of the response",
                                 ["path"], registry=registry,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.ttfb = Histogram("openai_frontend_time_to_first_byte_seconds",
                              "Time from request to the first body bytes (first token when streaming)",
                              ["path"], registry=registry,
                              buckets=(.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
        self.in_flight = Gauge("openai_frontend_requests_in_flight",
                               "HTTP requests being served", registry=registry)
        self.streams = Gauge("openai_frontend_streams_in_flight",
                             "Streamed (server-sent events) responses being sent",
                             registry=registry)
        self.disconnects = Counter("openai_frontend_client_disconnects",
                                   "Requests whose client went away before the response ended",
                                   ["path"], registry=registry)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500
        first = None
        internal = request_ids.new_id()
        sent = dict(scope["headers"]).get(request_ids.HEADER.encode())
        given = sent.decode("latin-1") if sent is not None else None
        valid = given is None or request_ids.is_valid(given)
        if not valid:
            given = None  # never echoed nor logged: it cannot go into a header or a line
        # The client's id back to it; a request without one learns the internal id.
        header = (request_ids.HEADER.encode(), (given or internal).encode("latin-1"))

        started = ended = gone = streaming = False

        async def receive_wrapper():
            nonlocal gone
            message = await receive()
            if message["type"] == "http.disconnect" and not ended:
                gone = True
            return message

        async def send_wrapper(message):
            nonlocal status, first, started, ended, streaming
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                message["headers"] = [*message.get("headers", []), header]
                streaming = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                                for k, v in message["headers"])
                if streaming:
                    self.streams.inc()
            elif message["type"] == "http.response.body":
                if first is None and message.get("body"):
                    first = time.perf_counter()
                if not message.get("more_body", False):
                    ended = True
            await send(message)

        token = request_ids.set_current(internal, given)
        self.in_flight.inc()
        try:
            if not valid:
                await _send_error(send_wrapper, BadRequestError(
                    f"X-Request-Id must be 1 to {request_ids.MAX_LENGTH} printable ASCII "
                    "characters without spaces", param="X-Request-Id"))
            else:
                try:
                    await self.app(scope, receive_wrapper, send_wrapper)
                except Exception as exc:
                    if started:
                        raise  # part of an answer went out: the server ends the connection
                    await _send_error(send_wrapper, internal_error(exc))
        finally:
            request_ids.reset_current(token)
            self.in_flight.dec()
            if streaming:
                self.streams.dec()
            end = time.perf_counter()
            # The route's template, not the raw path: model ids in paths and unknown URLs
            # would otherwise grow the metric registry without bound.
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            self.requests.labels(scope["method"], label, str(status)).inc()
            if gone:
                self.disconnects.labels(label).inc()
            self.latency.labels(label).observe(end - start)
            if first is not None:
                self.ttfb.labels(label).observe(first - start)
            self._log(scope, status, end - start, given, internal)

    def _log(self, scope, status: int, seconds: float, given: str | None,
             internal: str) -> None:
        """The line names the client's id (`-` when it sent none) and the internal one,
        which the Triton requests and the engine's log carry; text from the client is
        escaped in both formats, so that it cannot end the line."""
        client = scope.get("client") or ("-", 0)
        method, path = printable(scope["method"]), printable(scope["path"])
        if self.json:
            access_log.info(json.dumps({
                "client": f"{client[0]}:{client[1]}", "method": method, "path": path,
                "status": status, "request_id": given, "internal_request_id": internal,
                "duration_ms": round(seconds * 1000, 2)}))
        else:
            access_log.info('%s:%s "%s %s" %s %.1fms %s %s', client[0], client[1], method,
                            path, status, seconds * 1000, given or "-", internal)

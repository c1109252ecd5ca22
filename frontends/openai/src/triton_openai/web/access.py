"""The access log line, the request metrics and the request ids of every HTTP request.

A pure ASGI middleware (cheaper per request than Starlette's BaseHTTPMiddleware), the
outermost one, so that its line and metrics count every answer, refusals of the inner
middlewares included.
"""

from __future__ import annotations

import json
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..text.printable import printable
from . import request_ids
from .errors import BadRequestError, internal_error, send_error

access_log = logging.getLogger("triton_openai.access")


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
                await send_error(send_wrapper, BadRequestError(
                    f"X-Request-Id must be 1 to {request_ids.MAX_LENGTH} printable ASCII "
                    "characters without spaces", param="X-Request-Id"))
            else:
                try:
                    await self.app(scope, receive_wrapper, send_wrapper)
                except Exception as exc:
                    if started:
                        raise  # part of an answer went out: the server ends the connection
                    await send_error(send_wrapper, internal_error(exc))
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

"""Pure ASGI middlewares (cheaper per request than Starlette's BaseHTTPMiddleware).

Order, outermost first: access log + metrics, body size limit, API key.
"""

from __future__ import annotations

import hmac
import json
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from . import request_ids
from .errors import AuthenticationError, BadRequestError, RequestTooLargeError

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
    """413 for bodies over the limit, by Content-Length or, when chunked, while reading."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    def _error(self):
        return RequestTooLargeError(f"Request body is larger than {self.max_bytes} bytes.")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await _send_error(send, self._error())
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge()
            return message

        try:
            return await self.app(scope, limited_receive, send)
        except _TooLarge:
            return await _send_error(send, self._error())


class _TooLarge(Exception):
    pass


class AccessMiddleware:
    """One access-log line and the request metrics per request, when the response ends;
    the request's id (`X-Request-Id`, taken or made) on the response and in the line."""

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
        given = dict(scope["headers"]).get(request_ids.HEADER.encode())
        rid = given.decode("latin-1") if given is not None else request_ids.new_id()
        valid = request_ids.is_valid(rid)
        if not valid:
            rid = request_ids.new_id()
        header = (request_ids.HEADER.encode(), rid.encode("latin-1"))

        ended = gone = streaming = False

        async def receive_wrapper():
            nonlocal gone
            message = await receive()
            if message["type"] == "http.disconnect" and not ended:
                gone = True
            return message

        async def send_wrapper(message):
            nonlocal status, first, ended, streaming
            if message["type"] == "http.response.start":
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

        token = request_ids.set_current(rid)
        self.in_flight.inc()
        try:
            if not valid:
                await _send_error(send_wrapper, BadRequestError(
                    f"X-Request-Id must be 1 to {request_ids.MAX_LENGTH} printable ASCII "
                    "characters without spaces", param="X-Request-Id"))
            else:
                await self.app(scope, receive_wrapper, send_wrapper)
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
            client = scope.get("client") or ("-", 0)
            if self.json:
                access_log.info(json.dumps({
                    "client": f"{client[0]}:{client[1]}", "method": scope["method"],
                    "path": scope["path"], "status": status, "request_id": rid,
                    "duration_ms": round((end - start) * 1000, 2)}))
            else:
                access_log.info('%s:%s "%s %s" %s %.1fms %s', client[0], client[1],
                                scope["method"], scope["path"], status, (end - start) * 1000, rid)

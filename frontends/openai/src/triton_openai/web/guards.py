"""Requests refused before the app reads them: a missing or wrong API key, a body over the
size limit.  Pure ASGI middlewares (cheaper per request than Starlette's
BaseHTTPMiddleware); the app factory adds the key check outside the body limit, so that a
chunked body is not read for a client without the key."""

from __future__ import annotations

import hmac

from .errors import AuthenticationError, RequestTooLargeError, send_error

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
                return await send_error(send, AuthenticationError(msg))
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
                return await send_error(send, self._error())
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
                return await send_error(send, self._error())
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

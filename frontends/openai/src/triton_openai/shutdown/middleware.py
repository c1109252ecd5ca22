"""Turns requests away while the server drains, and answers the ones it cuts."""

from __future__ import annotations

import asyncio
import json

from ..text.printable import printable
from ..web.errors import RETRY_AFTER_S, ServiceUnavailableError
from ..web.sse import DONE
from .drain import CUT_MESSAGE, SHUTDOWN_MESSAGE, Drain

SHUTTING_DOWN_CODE = "server_shutting_down"


def _error(message: str) -> ServiceUnavailableError:
    return ServiceUnavailableError(message, code=SHUTTING_DOWN_CODE)


def _error_event(message: str) -> bytes:
    return b"data: " + json.dumps(_error(message).body()).encode() + b"\n\n" + DONE


async def _send_json_error(send, message: str) -> None:
    body = json.dumps(_error(message).body()).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(RETRY_AFTER_S).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _response_id(body: bytes) -> str | None:
    """The answer's id from a stream's first event: `data: {"id": ...}` (completions,
    chat) or `data: {"response": {"id": ...}}` (Responses, after an `event:` line)."""
    start = body.find(b"data: {")
    if start < 0:
        return None
    try:
        first = json.loads(body[start + 6:].split(b"\n", 1)[0])
    except ValueError:
        return None
    if not isinstance(first, dict):
        return None
    response = first.get("response")
    return first.get("id") or (response.get("id") if isinstance(response, dict) else None)


class DrainMiddleware:
    """Tracks every /v1/* request in `drain`; while draining, new ones get a 503."""

    def __init__(self, app, drain: Drain):
        self.app = app
        self.drain = drain

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        if self.drain.draining:
            return await _send_json_error(send, SHUTDOWN_MESSAGE)
        host, port = scope.get("client") or ("-", 0)
        task = asyncio.current_task()
        # The path goes into log lines (a cut request's): escaped as the access log's.
        record = self.drain.enter(scope["method"], printable(scope["path"]), f"{host}:{port}",
                                  task)
        started = ended = False

        async def tracking_send(message):
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
                headers = dict(message.get("headers") or ())
                record.streaming = headers.get(b"content-type", b"").startswith(
                    b"text/event-stream")
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                if record.streaming and record.response_id is None and body:
                    record.response_id = _response_id(body)
                if not message.get("more_body", False):
                    ended = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except asyncio.CancelledError:
            if not record.cut or task is None:
                raise
            # Our own cancellation (Drain.cut), not the server's: answer the client.
            task.uncancel()
            await self._tell_cut(send, started, ended, record.streaming)
        finally:
            self.drain.leave(record)

    @staticmethod
    async def _tell_cut(send, started: bool, ended: bool, streaming: bool) -> None:
        try:
            if not started:
                await _send_json_error(send, CUT_MESSAGE)
            elif not ended:
                # A JSON answer is sent whole, so only a stream can be part-way.
                tail = _error_event(CUT_MESSAGE) if streaming else b""
                await send({"type": "http.response.body", "body": tail, "more_body": False})
        except OSError:
            pass  # the client is gone as well

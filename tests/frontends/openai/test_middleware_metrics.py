"""The frontend's own series of AccessMiddleware (requests in flight, streams in flight,
client disconnects), driven through plain ASGI calls with a small app of our own."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from triton_openai.web.access import AccessMiddleware


def _value(registry, name, **labels):
    return registry.get_sample_value(name, labels) or 0.0


def _scope():
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [],
            "client": ("127.0.0.1", 1)}


def make_app(seen: dict, stream: bool, listen_for_disconnect: bool, registry):
    async def app(scope, receive, send):
        content_type = b"text/event-stream" if stream else b"application/json"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type)]})
        seen["streams"] = _value(registry, "openai_frontend_streams_in_flight")
        seen["in_flight"] = _value(registry, "openai_frontend_requests_in_flight")
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        if listen_for_disconnect and (await receive())["type"] == "http.disconnect":
            return  # the client is gone: the response never ends
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    return app


def run(stream: bool, client_leaves: bool):
    registry = CollectorRegistry()
    seen: dict = {}
    middleware = AccessMiddleware(make_app(seen, stream, client_leaves, registry), registry)
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(middleware(_scope(), receive, send))
    return registry, seen


def test_a_stream_is_in_flight_while_it_is_sent():
    registry, seen = run(stream=True, client_leaves=False)
    assert seen == {"streams": 1.0, "in_flight": 1.0}
    assert _value(registry, "openai_frontend_streams_in_flight") == 0
    assert _value(registry, "openai_frontend_requests_in_flight") == 0
    assert _value(registry, "openai_frontend_client_disconnects_total",
                  path="unmatched") == 0


def test_a_plain_response_is_no_stream():
    _, seen = run(stream=False, client_leaves=False)
    assert seen == {"streams": 0.0, "in_flight": 1.0}


def test_a_client_that_leaves_mid_stream_is_a_disconnect():
    registry, _ = run(stream=True, client_leaves=True)
    assert _value(registry, "openai_frontend_client_disconnects_total", path="unmatched") == 1
    assert _value(registry, "openai_frontend_streams_in_flight") == 0

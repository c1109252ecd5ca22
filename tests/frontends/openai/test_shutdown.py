"""Graceful shutdown of the frontend: a real `triton-openai` process over the fake Triton,
stopped with SIGTERM while streams are in flight."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time

import httpx
from frontend_process import Frontend

from qa.common.sse import aiter_events
from triton_openai.shutdown import Drain
from triton_openai.shutdown.server import EXIT_CUT, LINGER_S

CHAT = {"model": "llm", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def _stream(client, url, max_tokens, first):
    """(events, got [DONE]) of one streamed chat completion."""
    events, done = [], False
    async with client.stream("POST", url + "/v1/chat/completions",
                             json=dict(CHAT, max_tokens=max_tokens)) as r:
        assert r.status_code == 200
        async for event in aiter_events(r):
            if event.done:
                done = True
            else:
                events.append(event.json())
                first.set()
    return events, done


async def _stop_during_streams(fe: Frontend, n: int, max_tokens: int):
    """Start n streams, SIGTERM the frontend once all produce, probe it while it drains."""
    async with httpx.AsyncClient(timeout=60) as client:
        firsts = [asyncio.Event() for _ in range(n)]
        streams = [asyncio.ensure_future(_stream(client, fe.url, max_tokens, f)) for f in firsts]
        await asyncio.wait_for(asyncio.gather(*(f.wait() for f in firsts)), 10)
        fe.proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        ready = await client.get(fe.url + "/health/ready")
        live = await client.get(fe.url + "/health/live")
        late = await client.post(fe.url + "/v1/chat/completions", json=dict(CHAT, stream=False))
        results = await asyncio.gather(*streams)
    return results, ready, live, late


def test_sigterm_drains_streams_in_flight_and_exits_0(frontend):
    fe = frontend(delay=0.02, grace=30)
    results, ready, live, late = asyncio.run(_stop_during_streams(fe, 4, 60))
    # Draining: not ready at once, still alive, new work turned away in OpenAI's shape.
    assert ready.status_code == 503 and ready.json() == {"status": "shutting down"}
    assert live.status_code == 200
    assert late.status_code == 503
    assert late.json()["error"]["type"] == "service_unavailable"
    assert late.json()["error"]["code"] == "server_shutting_down"
    # Every stream in flight ran to its end.
    for events, done in results:
        assert done and not any("error" in e for e in events)
        assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert fe.proc.wait(15) == 0, fe.log
    assert "every request finished" in fe.log


def test_streams_past_the_grace_period_end_with_an_error_event(frontend):
    fe = frontend(delay=0.3, grace=1)
    t0 = time.monotonic()
    results, *_ = asyncio.run(_stop_during_streams(fe, 3, 60))
    took = time.monotonic() - t0
    ids = set()
    for events, done in results:
        assert done, "a cut stream still ends with [DONE]"
        error = events[-1]["error"]
        assert error["type"] == "service_unavailable" and "shut down" in error["message"]
        ids.add(events[0]["id"])
    assert took < 10, f"the cut came {took:.1f} s after the start"
    assert fe.proc.wait(15) == EXIT_CUT, fe.log
    # The log names every request it cut, by the id its client saw.
    for rid in ids:
        assert rid in fe.log, fe.log
    assert "stopped after cutting 3 request(s)" in fe.log


def test_a_request_without_an_answer_yet_is_cut_with_a_503(frontend):
    fe = frontend(delay=0.3, grace=0.5)

    async def run():
        async with httpx.AsyncClient(timeout=60) as client:
            pending = asyncio.ensure_future(client.post(
                fe.url + "/v1/chat/completions", json=dict(CHAT, stream=False, max_tokens=60)))
            await asyncio.sleep(0.5)
            fe.proc.send_signal(signal.SIGTERM)
            return await pending

    r = asyncio.run(run())
    assert r.status_code == 503 and r.json()["error"]["code"] == "server_shutting_down"
    assert fe.proc.wait(15) == EXIT_CUT


def _send_chat(sock: socket.socket, request: dict) -> None:
    """A chat request, written on a raw connection."""
    body = json.dumps(request).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))


def _finished_stream_unread(port: int) -> socket.socket:
    """A connection whose stream the server sent whole (its last chunk is in this socket's
    buffer), kept open as a client that has not read it yet keeps it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    _send_chat(sock, dict(CHAT, max_tokens=5))
    got = b""
    while not got.endswith(b"0\r\n\r\n"):  # the chunked body's end
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    assert b"[DONE]" in got, got
    return sock


def test_the_server_exits_once_its_clients_closed_their_connections(frontend):
    """Bytes an exiting server sent can still be on their way (a container's network
    goes with its last process): it half-closes each connection and waits for the client."""
    fe = frontend(delay=0.0, grace=30)
    sock = _finished_stream_unread(fe.port)
    fe.proc.send_signal(signal.SIGTERM)
    time.sleep(LINGER_S / 4)
    assert fe.proc.poll() is None, "the server exited before its client closed"
    assert sock.recv(1) == b"", "the server's half-close (end of file)"
    sock.close()
    t0 = time.monotonic()
    assert fe.proc.wait(15) == 0, fe.log
    assert time.monotonic() - t0 < LINGER_S, "the client's close did not end the wait"


def test_a_client_that_keeps_its_connection_open_delays_the_exit_by_the_linger_at_most(
        frontend):
    fe = frontend(delay=0.0, grace=30)
    sock = _finished_stream_unread(fe.port)
    t0 = time.monotonic()
    fe.proc.send_signal(signal.SIGTERM)
    try:
        assert fe.proc.wait(LINGER_S + 10) == 0, fe.log
    finally:
        sock.close()
    assert time.monotonic() - t0 >= LINGER_S * 0.9


def test_a_request_on_a_connection_opened_before_the_stop_gets_its_503(frontend):
    """The half-close is for connections whose answer went out: one that had not sent
    its request yet must still be answered (the drain's 503), not find the server's end
    of file."""
    fe = frontend(delay=0.0, grace=30)
    unread = _finished_stream_unread(fe.port)  # keeps the server lingering
    opened = socket.create_connection(("127.0.0.1", fe.port), timeout=10)
    try:
        fe.proc.send_signal(signal.SIGTERM)
        time.sleep(LINGER_S / 2)
        assert fe.proc.poll() is None
        _send_chat(opened, CHAT)
        answer = b""
        while chunk := opened.recv(65536):  # to the end: the 503 closes the connection
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"server_shutting_down" in answer, answer
    finally:
        opened.close()
        unread.close()
    assert fe.proc.wait(15) == 0, fe.log


def test_drain_with_nothing_in_flight_is_clean_at_once():
    async def run():
        d = Drain()
        t0 = time.monotonic()
        clean = await d.drain(grace=30)
        return clean, time.monotonic() - t0, d

    clean, took, d = asyncio.run(run())
    assert clean and took < 0.1 and d.draining and d.cut_requests == []


def test_drain_cuts_only_what_outlives_the_grace_period():
    async def run():
        d = Drain()

        async def request(seconds):
            record = d.enter("POST", "/v1/x", "c:1", asyncio.current_task())
            try:
                await asyncio.sleep(seconds)
                return "finished"
            except asyncio.CancelledError:
                return "cut" if record.cut else "cancelled"
            finally:
                d.leave(record)

        short = asyncio.ensure_future(request(0.05))
        long = asyncio.ensure_future(request(60))
        await asyncio.sleep(0)
        clean = await d.drain(grace=0.3, flush=1)
        return clean, await short, await long, d.cut_requests

    clean, short, long, cut = asyncio.run(run())
    assert not clean and short == "finished" and long == "cut"
    assert len(cut) == 1 and "POST /v1/x from c:1" in cut[0]


def test_the_log_names_a_cut_stream_by_the_id_its_client_saw():
    from triton_openai.shutdown.middleware import _response_id

    assert _response_id(b'data: {"id":"chatcmpl-1","choices":[]}\n\n') == "chatcmpl-1"
    assert _response_id(b'event: response.created\ndata: {"type":"response.created",'
                        b'"response":{"id":"resp_1"}}\n\n') == "resp_1"
    assert _response_id(b"data: [DONE]\n\n") is None
    assert _response_id(b": keep-alive\n\n") is None

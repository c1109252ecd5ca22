"""How long the frontend keeps an idle keep-alive connection: longer than its clients.

httpx (and the OpenAI SDK on it) drops an idle connection after 5 s, uvicorn's default
keep-alive.  Closing at the same moment races the client's next request on that
connection, which then fails with "Server disconnected without sending a response"; a
server that keeps it longer never closes under a client's request."""

from __future__ import annotations

import http.client
import signal
import time

import pytest

from triton_openai import cli


def _ask_twice(url: str, idle: float) -> int:
    """The status of a second request on one connection, `idle` seconds after the first."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/v1/models")
        first = conn.getresponse()
        first.read()
        assert first.status == 200 and not first.will_close
        sock = conn.sock
        time.sleep(idle)
        conn.request("GET", "/v1/models")
        second = conn.getresponse()
        second.read()
        assert conn.sock is sock, "a new connection was opened"
        return second.status
    finally:
        conn.close()


def test_an_idle_connection_outlives_the_clients_5_s(frontend):
    fe = frontend(0.0, 5)
    assert _ask_twice(fe.url, idle=6) == 200


def test_the_flag_sets_how_long_an_idle_connection_stays(frontend):
    fe = frontend(0.0, 5, "--timeout-keep-alive", "1")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _ask_twice(fe.url, idle=2.5)


def test_an_idle_connection_does_not_hold_up_the_shutdown(frontend):
    fe = frontend(0.0, 30)
    host, port = fe.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/v1/models")
    conn.getresponse().read()
    started = time.monotonic()
    fe.proc.send_signal(signal.SIGTERM)
    assert fe.proc.wait(15) == 0, fe.log
    assert time.monotonic() - started < 5
    conn.close()


def test_the_timeout_comes_from_the_environment_or_the_flag(monkeypatch):
    assert cli.build_parser().parse_args([]).timeout_keep_alive == 75.0
    monkeypatch.setenv(cli.KEEP_ALIVE_ENV, "120")
    assert cli.build_parser().parse_args([]).timeout_keep_alive == 120.0
    assert cli.build_parser().parse_args(["--timeout-keep-alive", "9.5"]).timeout_keep_alive == 9.5


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_timeout_that_is_not_positive_seconds_is_refused(value, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--timeout-keep-alive", value])
    assert "a number of seconds above 0" in capsys.readouterr().err

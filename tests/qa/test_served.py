"""qa/common/served.py with real, short-lived processes on this host."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from qa.common import served
from qa.common.docker import LEAST_CPU_WEIGHT
from qa.common.http_calls import http_status
from qa.common.served import ServedProcess, ServerError, free_port, wait_for_status, wait_until


def http_server() -> ServedProcess:
    port = free_port()
    return ServedProcess.host("http.server", [sys.executable, "-m", "http.server", str(port),
                                              "--bind", "127.0.0.1"], ports={"http": port})


def python(name: str, code: str, **kw) -> ServedProcess:
    return ServedProcess.host(name, [sys.executable, "-u", "-c", textwrap.dedent(code)], **kw)


def test_ready_http_server_answers_and_stops():
    with http_server() as server:
        took = server.wait_http("http", "/", timeout=30, interval=0.05)
        assert 0 < took < 30
        assert http_status(server.url("http") + "/") == 200
        assert http_status(server.url("http") + "/no-such-file") == 404
        # The URL alone, no server watched: as a poll every few milliseconds asks it.
        assert wait_for_status(server.url("http") + "/no-such-file", status=404, timeout=5,
                               interval=0.01) < 5
        assert server.running()
        pid = server.proc.pid
    assert server.proc is None and not server.running()
    assert http_status(f"http://127.0.0.1:{server.ports['http']}/") == 0
    assert "GET / HTTP" in server.log  # the request log, still there after the stop
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_server_that_dies_before_it_is_ready_fails_with_its_status_and_log():
    server = python("crasher", """
        import sys
        print("loading the model")
        print("out of memory", file=sys.stderr)
        sys.exit(3)
    """, ports={"http": free_port()})
    with server, pytest.raises(ServerError) as failure:
        server.wait_http("http", "/ready", timeout=30, interval=0.05)
    message = str(failure.value)
    assert "crasher exited with status 3" in message
    assert f"{server.url('http')}/ready to answer 200" in message
    assert "loading the model\nout of memory" in message


def test_a_server_that_never_answers_times_out_with_its_log():
    server = python("sleeper", """
        import time
        print("still starting")
        time.sleep(60)
    """, ports={"http": free_port()})
    with server:
        start = time.monotonic()
        with pytest.raises(ServerError) as failure:
            server.wait_http("http", "/", timeout=1, interval=0.05)
        assert time.monotonic() - start < 10
        assert server.running()
    message = str(failure.value)
    assert message.startswith(f"sleeper: gave up after 1 s waiting for {server.url('http')}/")
    assert "still starting" in message
    assert server.exit_status() == -1  # gone


def test_stop_sends_sigterm_first_and_returns_the_exit_status():
    server = python("graceful", """
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: (print("draining"), sys.exit(7)))
        print("up")
        time.sleep(60)
    """)
    wait_until(lambda: "up" in server.log, timeout=30, describe="its first line",
               process=server, interval=0.05)
    assert server.stop(timeout=30) == 7
    assert server.log.splitlines() == ["up", "draining"]
    assert server.stop() is None  # stopped already


def test_stop_kills_what_ignores_sigterm_and_its_whole_group():
    server = python("stubborn", """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c",
                                  "import signal, time; signal.signal(signal.SIGTERM, "
                                  "signal.SIG_IGN); time.sleep(60)"])
        print(child.pid)
        time.sleep(60)
    """, own_group=True)
    wait_until(lambda: server.log.strip().isdigit(), timeout=30, describe="the child's pid",
               process=server, interval=0.05)
    child = int(server.log)
    start = time.monotonic()
    assert server.stop(timeout=0.5) is None  # it had to be killed
    assert time.monotonic() - start < 10
    wait_until(lambda: not _alive(child), timeout=10, describe="the child to go")


def test_sigterm_goes_to_the_server_alone_as_docker_stop_sends_it():
    # Its children (vLLM's engines under tritonserver) are the server's to stop.
    server = python("parent", """
        import signal, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
                                  "import signal, sys, time\\n"
                                  "def said(*_): print('child: SIGTERM', flush=True)\\n"
                                  "signal.signal(signal.SIGTERM, said)\\n"
                                  "print('child up', flush=True); time.sleep(60)"])
        signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.5), sys.exit(3)))
        time.sleep(60)
    """, own_group=True)
    wait_until(lambda: "child up" in server.log, timeout=30, describe="the child",
               process=server, interval=0.05)
    assert server.stop(timeout=30) == 3
    assert "child: SIGTERM" not in server.log


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # a zombie waits for init, but is dead
    except FileNotFoundError:
        return False


def test_wait_until_without_a_process_says_what_it_waited_for():
    with pytest.raises(ServerError, match=r"^gave up after 0 s waiting for the moon$"):
        wait_until(lambda: False, timeout=0.1, describe="the moon", interval=0.01)
    calls = []
    assert wait_until(lambda: calls.append(1) or len(calls) == 3, timeout=10,
                      describe="three calls", interval=0.01) < 10


def test_wait_until_shows_the_log_it_is_given_instead_of_the_process_own():
    # A server that `docker exec` started logs into a file of the container, not to it.
    server = python("quiet", """
        import time
        print("the container's own output")
        time.sleep(60)
    """)
    with server, pytest.raises(ServerError) as failure:
        wait_until(lambda: False, timeout=0.2, describe="the exec'd server", process=server,
                   interval=0.05, log=lambda: "the exec'd server's log")
    message = str(failure.value)
    assert message.endswith("waiting for the exec'd server:\nthe exec'd server's log")
    assert "the container's own output" not in message


def test_wait_exit_gives_the_status_or_none_while_the_server_runs():
    server = python("short", """
        import sys, time
        time.sleep(0.5)
        sys.exit(4)
    """)
    with server:
        assert server.wait_exit(0.05) is None
        assert server.wait_exit(30) == 4
    assert server.wait_exit(1) == -1  # stopped and gone


def test_a_container_runs_at_the_least_cpu_weight_before_the_callers_options(monkeypatch):
    calls = []

    def fake_docker(*args, check=True, timeout=120):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, "c0ffee\n", "")

    monkeypatch.setattr(served, "docker", fake_docker)
    box = ServedProcess.container("box", "image:tag", ports={"http": 8000},
                                  docker_args=["--cpu-shares=1024"], command=["serve"])
    [run] = calls
    assert box.cid == "c0ffee"
    assert run[:4] == ("run", "-d", "--shm-size=1g", LEAST_CPU_WEIGHT)
    assert run[4:6] == ("-p", f"127.0.0.1:{box.ports['http']}:8000")
    # The caller's options come after the harness's, so that theirs win.
    assert run[6:] == ("--cpu-shares=1024", "image:tag", "serve")
    calls.clear()
    assert ServedProcess.container("portless", "image:tag").ports == {}
    assert calls == [("run", "-d", "--shm-size=1g", LEAST_CPU_WEIGHT, "image:tag")]

"""Slow, idle and vanishing clients, against one container of the image's default command:
a thousand idle keep-alive connections on each endpoint block no new request; clients
that read a byte a second hold no other stream back and grow no process's memory while
they read; a soak of a few thousand mixed requests (some streams abandoned after their
first event, some refused) leaves every process's resident memory within 10% of where it
was after warm-up, and nothing in flight.

The container starts with the soft limit of open files that systemd gives services and
containerd 2 passes on to containers (1024): the image's entrypoint raises it to the hard
limit, without which the connections above are not served.  The figures (seconds, MiB)
go to the run's figures file.
"""
from __future__ import annotations

import asyncio
import json
import resource
import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from qa.common.figures import record
from qa.common.metrics import series_total
from qa.common.served import wait_until
from qa.common.sse import aiter_events
from qa.L0_image.conftest import docker, serve
from qa.L0_lifecycle.streams import StreamResult, batch, stream
from qa.L0_reliability.processes import resident_mib

pytestmark = pytest.mark.docker

MODEL = "vllm_model"
FRONTEND_PORT = 9000             # in the container
SOFT_NOFILE, HARD_NOFILE = 1024, 4096
IDLE_CONNECTIONS = 1000          # per endpoint
NEW_REQUEST_S = 10.0             # a new request, with every idle connection held
SLOW_READERS, SLOW_TOKENS = 4, 1000
SOAK_WARMUP, SOAK_REQUESTS, SOAK_CONCURRENCY = 300, 2000, 8
RSS_GROWTH = 0.10                # of each process, from after warm-up to the soak's end


@pytest.fixture(scope="module")
def served(image):
    box = serve(image, "--ulimit", f"nofile={SOFT_NOFILE}:{HARD_NOFILE}")
    try:
        yield box
    finally:
        docker("rm", "-f", box.cid, check=False)


@pytest.fixture(scope="module", autouse=True)
def open_files_for_the_clients():
    """This process holds every idle connection: two thousand and some descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * IDLE_CONNECTIONS + 512
    if soft == resource.RLIM_INFINITY or soft >= want:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"this process may open {hard} files; the clients need {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def metrics(served) -> str:
    return httpx.get(f"http://127.0.0.1:{served.openai}/metrics", timeout=30).text


def in_flight(page: str) -> dict[str, float]:
    """From a metrics page: requests running in the engine, streams the frontend sends."""
    return {"engine": series_total(page, "vllm:num_requests_running", model_name=MODEL),
            "frontend streams": series_total(page, "openai_frontend_streams_in_flight")}


def wait_nothing_in_flight(served, timeout: float, after: str) -> None:
    wait_until(lambda: not any(in_flight(metrics(served)).values()), timeout=timeout,
               describe=f"nothing in flight in the engine and the frontend {after}")


# --- idle keep-alive connections -------------------------------------------------------

def _response_status(sock: socket.socket) -> int:
    """Read one HTTP/1.1 response (with a Content-Length) off `sock`; its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before answering")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in lines[1:]
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-answer")
        body += chunk
    return int(lines[0].split(b" ", 2)[1])


def _get(sock: socket.socket, path: str) -> None:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())


def open_idle(port: int, path: str, n: int, within: float) -> tuple[list[socket.socket], list]:
    """n keep-alive connections to `port`, each having had one GET `path` answered; the
    connections, and each answer's status (or why it had none within `within` seconds)."""
    socks: list[socket.socket] = []
    deadline = time.monotonic() + within
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=within)
        socks.append(sock)
        _get(sock, path)
    answers = []
    for sock in socks:
        sock.settimeout(max(deadline - time.monotonic(), 0.05))
        try:
            answers.append(_response_status(sock))
        except OSError as err:
            answers.append(type(err).__name__)
    return socks, answers


async def _new_requests(served, n: int) -> list[tuple[str, float, str]]:
    """n requests at once on new connections, half OpenAI's, half KServe's: (endpoint,
    seconds, status or error) each."""
    async def one(i: int, client: httpx.AsyncClient):
        if i % 2:
            what, url = "openai", f"http://127.0.0.1:{served.openai}/v1/completions"
            body = {"model": MODEL, "prompt": "Hello", "max_tokens": 8}
        else:
            what, url = "kserve", f"http://127.0.0.1:{served.http}/v2/models/{MODEL}/generate"
            body = {"text_input": "Hello", "parameters": {"max_tokens": 8}}
        started = time.monotonic()
        try:
            status = str((await client.post(url, json=body)).status_code)
        except httpx.HTTPError as err:
            status = type(err).__name__
        return what, time.monotonic() - started, status

    async with httpx.AsyncClient(timeout=3 * NEW_REQUEST_S) as client:
        return list(await asyncio.gather(*(one(i, client) for i in range(n))))


def test_a_thousand_idle_keep_alive_connections_per_endpoint_block_no_new_request(served):
    endpoints = {"openai": (served.openai, "/v1/models"),
                 "kserve": (served.http, "/v2/health/ready")}
    idle: dict[str, list[socket.socket]] = {}
    try:
        for name, (port, path) in endpoints.items():
            started = time.monotonic()
            idle[name], answers = open_idle(port, path, IDLE_CONNECTIONS, within=60)
            record(f"idle_keep_alive_{name}_open_s", round(time.monotonic() - started, 1), "s",
                   f"{IDLE_CONNECTIONS} connections opened, one GET {path} answered on each")
            unanswered = [a for a in answers if a != 200]
            assert not unanswered, (
                f"{len(unanswered)} of {IDLE_CONNECTIONS} {name} connections had no 200: "
                f"{sorted(set(map(str, unanswered)))}\n{served.box.log_tail(30)}")
        answered = asyncio.run(_new_requests(served, 16))
        # The idle connections were kept, not dropped: every tenth answers again.
        again = {name: [] for name in endpoints}
        for name, socks in idle.items():
            for sock in socks[::10]:
                _get(sock, endpoints[name][1])
                sock.settimeout(NEW_REQUEST_S)
                try:
                    again[name].append(_response_status(sock))
                except OSError as err:
                    again[name].append(type(err).__name__)
    finally:
        for socks in idle.values():
            for sock in socks:
                sock.close()
    slowest = max(seconds for _, seconds, _ in answered)
    record("idle_keep_alive_new_request_max_s", round(slowest, 2), "s",
           f"16 new requests with {IDLE_CONNECTIONS} idle connections held on each endpoint")
    assert all(status == "200" and seconds <= NEW_REQUEST_S
               for _, seconds, status in answered), f"{answered}\n{served.box.log_tail(30)}"
    for name, statuses in again.items():
        assert statuses == [200] * len(statuses), (name, statuses)


# --- slow clients ----------------------------------------------------------------------

def container_address(cid: str) -> str:
    """The container's own address on Docker's bridge: no proxy between a client and the
    server's socket, as in a pod."""
    return docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                  cid).stdout.strip()


class SlowReader(threading.Thread):
    """A long streamed completion (with logprobs: a third of a megabyte of events) whose
    client reads one byte a second through a small receive buffer, connected straight to
    the frontend's socket in the container (Docker's port proxy would buffer for it)."""

    def __init__(self, address: str):
        super().__init__(daemon=True)
        body = json.dumps({"model": MODEL, "prompt": "Once upon a time", "max_tokens": SLOW_TOKENS,
                           "ignore_eos": True, "stream": True, "logprobs": 5}).encode()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # The first request with logprobs takes seconds more than the next.
        self.sock.settimeout(60)
        self.sock.connect((address, FRONTEND_PORT))
        self.sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.read = b""
        self.ended: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                byte = self.sock.recv(1)
            except OSError as err:
                self.ended = type(err).__name__
                return
            if not byte:
                self.ended = "closed by the server"
                return
            self.read += byte

    def vanish(self) -> None:
        """Go away without reading the rest (the unread bytes make it a reset)."""
        self.stop.set()
        self.join(70)
        self.sock.close()


def _batch_seconds(served, n: int) -> float:
    """n streamed chat completions of 32 tokens at once: seconds until the last ended."""
    started = time.monotonic()
    results = asyncio.run(batch(f"http://127.0.0.1:{served.openai}", MODEL, n, max_tokens=32))
    assert all(r.finished for r in results), [r.kind() for r in results]
    return time.monotonic() - started


def test_clients_reading_a_byte_a_second_hold_back_no_other_stream(served):
    _batch_seconds(served, 8)  # the first streams after the start are slower
    alone = _batch_seconds(served, 8)
    made = tokens_made(metrics(served))
    address = container_address(served.cid)
    readers = [SlowReader(address) for _ in range(SLOW_READERS)]
    try:
        for reader in readers:
            reader.start()
        # The engine makes their tokens in seconds; the events then wait for the readers.
        def all_made() -> bool:
            page = metrics(served)
            return (tokens_made(page) >= made + SLOW_READERS * SLOW_TOKENS
                    and not in_flight(page)["engine"])
        wait_until(all_made, timeout=120,
                   describe="the engine to finish the slow clients' streams")
        memory_then, then = resident_mib(served.cid), time.monotonic()
        beside = _batch_seconds(served, 8)
        time.sleep(max(0.0, 15 - (time.monotonic() - then)))
        memory_later = resident_mib(served.cid)
        for reader in readers:
            # Still connected, and reading a 200 (a byte a second: its first bytes).
            head = reader.read[:12]
            assert reader.is_alive() and head and b"HTTP/1.1 200".startswith(head), (
                reader.ended, reader.read)
    finally:
        for reader in readers:
            reader.vanish()
    wait_nothing_in_flight(served, timeout=10, after="10 s after the slow clients left")
    record("slow_readers_other_streams_s", round(beside, 2), "s",
           f"8 streams of 32 tokens while {SLOW_READERS} clients read a byte a second "
           f"(alone: {alone:.2f} s)")
    grown = {p: round(memory_later[p] - memory_then[p], 1) for p in memory_then}
    record("slow_readers_rss_growth_mib", max(grown.values()), "MiB",
           f"largest growth of a process's resident memory over 15 s of slow reading: {grown}")
    assert beside <= 2 * alone + 2.0, (alone, beside)
    assert all(mib <= max(16.0, 0.05 * memory_then[p]) for p, mib in grown.items()), grown


def tokens_made(page: str) -> float:
    return series_total(page, "vllm:generation_tokens_total", model_name=MODEL)


# --- a soak of mixed requests ----------------------------------------------------------

def _soak_requests(served) -> list[Callable]:
    """The kinds of request the soak sends in turn: each takes (client, i) and returns
    None when served as it should be, else what went wrong."""
    openai = f"http://127.0.0.1:{served.openai}"
    kserve = f"http://127.0.0.1:{served.http}/v2/models/{MODEL}"

    async def completion(client, i):
        r = await client.post(f"{openai}/v1/completions", json={
            "model": MODEL, "prompt": f"Request {i}:", "max_tokens": 1 + i % 12,
            "temperature": 0.8, "seed": i})
        return None if r.status_code == 200 and r.json()["choices"] else r.text[:200]

    async def chat(client, i):
        r = await client.post(f"{openai}/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": f"Say {i}"}],
            "max_tokens": 8})
        return None if r.status_code == 200 and r.json()["choices"] else r.text[:200]

    async def streamed_chat(client, i):
        result = await stream(client, f"{openai}/v1/chat/completions", {
            "model": MODEL, "messages": [{"role": "user", "content": f"Count to {i}"}],
            "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True}})
        return None if result.finished else result.kind()

    async def abandoned_stream(client, i):
        """A client that goes away after the first event of a long stream."""
        async with client.stream("POST", f"{openai}/v1/completions", json={
                "model": MODEL, "prompt": f"Story {i}:", "max_tokens": 300,
                "ignore_eos": True, "stream": True}) as r:
            if r.status_code != 200:
                return f"HTTP {r.status_code}"
            async for _ in aiter_events(r):
                return None
        return "no event"

    async def generate(client, i):
        r = await client.post(f"{kserve}/generate", json={
            "text_input": f"Request {i}:", "parameters": {"max_tokens": 8}})
        return None if r.status_code == 200 and "text_output" in r.json() else r.text[:200]

    async def generate_stream(client, i):
        result: StreamResult = await stream(client, f"{kserve}/generate_stream", {
            "text_input": f"Request {i}:", "parameters": {"max_tokens": 8}})
        return None if result.status == 200 and result.done and not result.errors \
            else result.kind()

    async def unknown_model(client, i):
        r = await client.post(f"{openai}/v1/completions", json={
            "model": "no-such-model", "prompt": "x", "max_tokens": 1})
        return None if r.status_code == 404 else f"HTTP {r.status_code}: {r.text[:200]}"

    async def models(client, i):
        r = await client.get(f"{openai}/v1/models")
        return None if r.status_code == 200 else r.text[:200]

    return [completion, streamed_chat, abandoned_stream, generate, chat, generate_stream,
            unknown_model, models]


async def _soak(served, first: int, n: int) -> tuple[dict[str, str], float]:
    """Requests first .. first+n-1 of the mix, SOAK_CONCURRENCY at a time: what went wrong
    (request -> why), and the seconds it took."""
    kinds = _soak_requests(served)
    failures: dict[str, str] = {}
    order = iter(range(first, first + n))
    started = time.monotonic()

    async def worker(client):
        for i in order:
            kind = kinds[i % len(kinds)]
            try:
                why = await kind(client, i)
            except httpx.HTTPError as err:
                why = f"{type(err).__name__}: {err}"
            if why is not None:
                failures[f"{i} ({kind.__name__})"] = why

    limits = httpx.Limits(max_connections=2 * SOAK_CONCURRENCY)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(SOAK_CONCURRENCY)))
    return failures, time.monotonic() - started


def _settled_memory(served) -> dict[str, float]:
    wait_nothing_in_flight(served, timeout=30, after="30 s after the requests")
    time.sleep(2)
    return resident_mib(served.cid)


def test_a_soak_of_mixed_requests_leaves_memory_where_warm_up_left_it(served):
    failures, _ = asyncio.run(_soak(served, 0, SOAK_WARMUP))
    assert not failures, failures
    warm = _settled_memory(served)
    failures, took = asyncio.run(_soak(served, SOAK_WARMUP, SOAK_REQUESTS))
    assert not failures, dict(list(failures.items())[:20])
    after = _settled_memory(served)
    record("soak_requests_per_s", round(SOAK_REQUESTS / took, 1), "1/s",
           f"{SOAK_REQUESTS} mixed requests, {SOAK_CONCURRENCY} at a time")
    growth = {p: round(after[p] / warm[p] - 1, 3) for p in warm if warm[p]}
    for process in warm:
        record(f"soak_rss_{process.replace(' ', '_')}_mib", after[process], "MiB",
               f"after {SOAK_REQUESTS} requests; {warm[process]} MiB after warm-up")
    worst = max(growth, key=growth.get)
    record("soak_rss_growth_max", round(100 * growth[worst], 1), "%",
           f"of the {worst}, the most grown process's resident memory from after warm-up")
    missing = [p for p, mib in warm.items() if not mib]
    assert not missing, f"no such process in the container: {missing}"
    assert all(g <= RSS_GROWTH for g in growth.values()), (growth, warm, after)

"""The HTTP transport (Triton's generate_stream) against a fake Triton HTTP server."""

from __future__ import annotations

import asyncio
import json

import pytest

from triton_openai.triton import vllm_contract as wire
from triton_openai.triton.client import Tensor, TritonError
from triton_openai.triton.http_client import HttpTritonClient


class FakeTritonHttp:
    """Speaks just enough HTTP/1.1: keep-alive, chunked SSE for generate_stream, JSON
    for the rest.  `events` are the SSE payloads of a generation; `batched` writes them
    all at once; `split` writes each event in two pieces; `forever` streams until the
    client leaves; a `status` other than 200 answers with `error`, on generate_stream and
    on generate (the vLLM backend's health request), as JSON or, with `error_event`, as
    generate_stream's event (`data: {"error": ...}`, which Triton sends with its error
    status); `silent` answers neither.  Abort requests (the vLLM backend's parameter)
    are recorded."""

    def __init__(self, events=(), batched=False, split=False, forever=False, status=200,
                 close_idle=False, silent=False, error="bad thing", error_event=False):
        self.events = [json.dumps(e).encode() for e in events]
        self.error = error
        self.error_event = error_event
        self.batched, self.split, self.forever = batched, split, forever
        self.status, self.close_idle, self.silent = status, close_idle, silent
        self.requests: list[tuple[str, dict | None]] = []
        self.aborted: list[str] = []
        self.connections = 0
        self.left_early = asyncio.Event()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ")
                headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
                body = None
                if "content-length" in headers:
                    body = json.loads(await reader.readexactly(int(headers["content-length"])))
                self.requests.append((f"{method} {path}", body))
                await self._answer(method, path, body, reader, writer)
                if self.close_idle:
                    writer.close()
                    return
        finally:
            writer.close()

    async def _answer(self, method, path, body, reader, writer):
        if path.endswith("/generate"):
            await self._answer_generate(reader, writer)
            return
        if not path.endswith("/generate_stream"):
            payload = {
                "/v2/health/ready": b"",
                "/v2/repository/index": json.dumps([
                    {"name": "llm", "version": "1", "state": "READY"},
                    {"name": "broken", "state": "UNAVAILABLE"}]).encode(),
                "/v2/models/llm/config": json.dumps({
                    "backend": "vllm", "output": [{"name": "text_output"}],
                    "parameters": {"vllm_runner": {"string_value": "generate"}}}).encode(),
            }[path]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
            return
        target = (body.get("parameters") or {}).get("vllm_abort_request_id")
        if self.silent and target is None:
            # Like a non-streamed generation: nothing at all until it is done.
            if await reader.read(1) == b"":
                self.left_early.set()
            return
        if self.status != 200:
            if self.error_event:
                payload = b"data: " + json.dumps({"error": self.error}).encode() + b"\n\n"
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: text/event-stream\r\n"
                             b"Content-Length: %d\r\n\r\n%s"
                             % (self.status, len(payload), payload))
            else:
                self._write_json(writer, self.status, {"error": self.error})
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        if target is not None:
            self.aborted.append(target)
        else:
            events = [b"data: " + e + b"\n\n" for e in self.events]
            if self.batched:
                events = [b"".join(events)]
            if self.split:
                events = [piece for e in events for piece in (e[:9], e[9:])]
            while events or self.forever:
                data = events.pop(0) if events else b'data: {"text_output": "x"}\n\n'
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                try:
                    await writer.drain()
                except ConnectionError:
                    self.left_early.set()
                    return
                await asyncio.sleep(0.005)
                if writer.is_closing():
                    break
        writer.write(b"0\r\n\r\n")
        try:
            await writer.drain()
        except ConnectionError:
            self.left_early.set()


    async def _answer_generate(self, reader, writer):
        if self.silent:
            if await reader.read(1) == b"":
                self.left_early.set()
            return
        if self.status != 200:
            self._write_json(writer, self.status, {"error": self.error})
        else:
            self._write_json(writer, 200, {"model_name": "llm", "model_version": "1"})

    @staticmethod
    def _write_json(writer, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (status, len(payload), payload))


def run(coro):
    return asyncio.run(coro)


async def collect(client, inputs=(), request_id="r1"):
    return [r async for r in client.stream_infer("llm", list(inputs), ["text_output"], request_id)]


def test_streams_decoded_outputs_then_a_final_response():
    async def main():
        async with FakeTritonHttp([{"text_output": ["a", "b"], "num_output_tokens": [1, 1],
                                    "model_name": "llm", "id": "r1"},
                                   {"text_output": ["c", ""], "finish_reason": ["length", ""]}]) as t:
            client = HttpTritonClient(t.url)
            out = await collect(client)
            await client.close()
            return out

    out = run(main())
    assert [r.final for r in out] == [False, False, True]
    assert out[0].outputs["text_output"].as_strings() == ["a", "b"]
    assert out[0].outputs["num_output_tokens"].as_list() == [1, 1]
    assert "model_name" not in out[0].outputs and "id" not in out[0].outputs
    assert out[1].outputs["finish_reason"].as_strings() == ["length", ""]
    assert out[2].outputs == {}


def test_request_body_maps_tensors_to_generate_fields():
    async def main():
        async with FakeTritonHttp([{"text_output": "a"}]) as t:
            client = HttpTritonClient(t.url)
            await collect(client, [Tensor.int64s("input_ids", [5, 6]), Tensor.bool_("stream", True),
                                   Tensor.bytes_("sampling_parameters", ['{"n": 1}'])], "req-7")
            await client.close()
            return t.requests

    (what, body), = run(main())
    assert what == "POST /v2/models/llm/generate_stream"
    assert body == {"id": "req-7", "input_ids": [5, 6], "stream": True,
                    "sampling_parameters": '{"n": 1}'}


def test_events_that_arrive_together_are_flagged():
    async def main():
        async with FakeTritonHttp([{"text_output": t} for t in "abc"], batched=True) as t:
            client = HttpTritonClient(t.url)
            out = await collect(client)
            await client.close()
            return out

    out = run(main())
    assert [(r.outputs.get("text_output") and r.outputs["text_output"].as_strings(), r.more)
            for r in out[:3]] == [(["a"], True), (["b"], True), (["c"], False)]


def test_an_event_split_across_reads_is_read_once():
    async def main():
        async with FakeTritonHttp([{"text_output": "héllo"}, {"text_output": "!"}], split=True) as t:
            client = HttpTritonClient(t.url)
            out = await collect(client)
            await client.close()
            return out

    out = run(main())
    assert [r.outputs["text_output"].as_strings() for r in out[:-1]] == [["héllo"], ["!"]]


def test_connections_are_reused_and_stale_ones_replaced():
    async def main(close_idle):
        async with FakeTritonHttp([{"text_output": "a"}], close_idle=close_idle) as t:
            client = HttpTritonClient(t.url)
            for i in range(3):
                await collect(client, request_id=f"r{i}")
                await asyncio.sleep(0.05)  # lets a closed connection be noticed, or not
            assert await client.server_ready()
            await client.close()
            return t.connections, len(t.requests)

    assert run(main(False)) == (1, 4)
    assert run(main(True)) == (4, 4)  # the server closes each one: a new one every time


def test_leaving_early_closes_the_stream_and_sends_an_abort():
    async def main():
        async with FakeTritonHttp(forever=True) as t:
            client = HttpTritonClient(t.url)
            stream = client.stream_infer("llm", [], ["text_output"], "req-1")
            seen = 0
            async for _ in stream:
                seen += 1
                if seen == 2:
                    break
            await stream.aclose()
            await client.close()  # waits for the abort request in flight
            await asyncio.wait_for(t.left_early.wait(), 5)
            return t.aborted

    assert run(main()) == ["req-1"]


def test_cancelled_before_the_first_response_closes_and_aborts():
    async def main():
        async with FakeTritonHttp(silent=True) as t:
            client = HttpTritonClient(t.url)
            task = asyncio.ensure_future(collect(client, request_id="req-2"))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await client.close()
            await asyncio.wait_for(t.left_early.wait(), 5)
            return t.aborted

    assert run(main()) == ["req-2"]


def test_no_abort_after_the_stream_ended():
    async def main():
        async with FakeTritonHttp([{"text_output": "a"}]) as t:
            client = HttpTritonClient(t.url)
            await collect(client)
            await client.close()
            return t.aborted

    assert run(main()) == []


@pytest.mark.parametrize("sent, message, status", [
    ("[invalid_argument] max_tokens must be at least 1", "max_tokens must be at least 1", 400),
    ("[unavailable] the engine died", "the engine died", 503),
    ("[internal] RuntimeError: oops", "RuntimeError: oops", 500),
    # Triton's own words, no kind: a dead stub is the server's fault.
    ("Stub process 'm_0_0' is not healthy.", "Stub process 'm_0_0' is not healthy.", 503),
    ("something Triton says", "something Triton says", 500),
])
def test_an_error_event_is_a_triton_error(sent, message, status):
    async def main():
        async with FakeTritonHttp([{"text_output": "a"}, {"error": sent}]) as t:
            client = HttpTritonClient(t.url)
            got = []
            with pytest.raises(TritonError) as err:
                async for r in client.stream_infer("llm", [], [], "r"):
                    got.append(r)
            await client.close()
            return got, err.value

    got, err = run(main())
    assert len(got) == 1 and err.message == message and err.status == status


@pytest.mark.parametrize("http_status, status", [(400, 400), (404, 400), (503, 503), (500, 500)])
def test_an_error_status_is_a_triton_error(http_status, status):
    async def main():
        async with FakeTritonHttp(status=http_status) as t:
            client = HttpTritonClient(t.url)
            with pytest.raises(TritonError) as err:
                await collect(client)
            await client.close()
            return err.value

    err = run(main())
    assert err.status == status and "bad thing" in err.message


def test_an_error_status_says_less_than_the_kind_of_the_backends_error():
    # Triton's generate endpoints answer any model error with a 400.
    async def main():
        async with FakeTritonHttp(status=400, error="[unavailable] the engine died") as t:
            client = HttpTritonClient(t.url)
            with pytest.raises(TritonError) as err:
                await collect(client)
            await client.close()
            return err.value

    err = run(main())
    assert (err.status, err.message) == (503, "the engine died")


@pytest.mark.parametrize("http_status, sent, message, status", [
    (400, "[unavailable] the vLLM engine of model 'llm' died; the server cannot serve it "
          "until it is restarted", "the vLLM engine of model 'llm' died; the server cannot "
          "serve it until it is restarted", 503),
    (400, "[invalid_argument] max_tokens must be at least 1",
     "max_tokens must be at least 1", 400),
    (503, "Request for unknown model: 'llm' is not found", "Request for unknown model: 'llm' "
          "is not found", 503),
])
def test_an_error_status_with_an_event_body_is_unwrapped(http_status, sent, message, status):
    """generate_stream answers a refused request with its error status and the error as
    an event: the message is the error's text, not the event's line."""
    async def main():
        async with FakeTritonHttp(status=http_status, error=sent, error_event=True) as t:
            client = HttpTritonClient(t.url)
            with pytest.raises(TritonError) as err:
                await collect(client)
            await client.close()
            return err.value

    err = run(main())
    assert (err.status, err.message) == (status, message)


def test_unreachable_server():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = HttpTritonClient(f"http://127.0.0.1:{port}")
        ready = await client.server_ready()
        with pytest.raises(TritonError) as err:
            await collect(client)
        return ready, err.value.status

    assert run(main()) == (False, 503)


def _names_resolve_to_loopback(monkeypatch, delay: float = 0) -> list[str]:
    """Every name the running loop looks up answers 127.0.0.1 after `delay` seconds;
    the list returned records the names looked up."""
    loop = asyncio.get_running_loop()
    lookups = []
    real = loop.getaddrinfo

    async def getaddrinfo(host, port, **kw):
        lookups.append(host)
        await asyncio.sleep(delay)
        return await real("127.0.0.1", port, **kw)
    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return lookups


def test_the_name_is_looked_up_once_and_again_after_a_failed_connect(monkeypatch):
    """New connections reuse the address (no DNS round trip each time the pool grows);
    a connect that fails looks the name up again, as a moved Service needs."""
    async def main():
        lookups = _names_resolve_to_loopback(monkeypatch)
        async with FakeTritonHttp([{"text_output": "a"}], close_idle=True) as t:
            port = t.url.rsplit(":", 1)[1]
            client = HttpTritonClient(f"http://triton.example:{port}")
            for i in range(3):
                await collect(client, request_id=f"r{i}")
            t.server.close()
            await t.server.wait_closed()
            for _ in range(2):
                with pytest.raises(TritonError) as err:
                    await collect(client)
            return lookups, t.connections, err.value

    lookups, connections, err = run(main())
    assert connections == 3 and lookups == ["triton.example"] * 2
    assert err.status == 503 and "cannot reach Triton at triton.example" in err.message


def test_connections_opened_together_share_one_lookup(monkeypatch):
    async def main():
        # Slow enough that every stream is waiting for it.
        lookups = _names_resolve_to_loopback(monkeypatch, delay=0.05)
        async with FakeTritonHttp([{"text_output": "a"}]) as t:
            port = t.url.rsplit(":", 1)[1]
            client = HttpTritonClient(f"http://triton.example:{port}")
            await asyncio.gather(*(collect(client, request_id=f"r{i}") for i in range(8)))
            return lookups, t.connections

    lookups, connections = run(main())
    assert lookups == ["triton.example"] and connections == 8


def test_a_lookup_that_does_not_answer_is_named_in_the_error(monkeypatch):
    from triton_openai.triton import http_client

    async def main():
        loop = asyncio.get_running_loop()

        async def getaddrinfo(host, port, **kw):
            await asyncio.sleep(10)
        monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(http_client, "_CONNECT_TIMEOUT_S", 0.05)
        client = HttpTritonClient("http://triton.example:8000")
        with pytest.raises(TritonError) as err:
            await collect(client)
        return err.value

    err = run(main())
    assert err.status == 503 and err.message == (
        "cannot reach Triton at triton.example:8000: no address for triton.example in 0.05 s")


def test_lists_models_with_their_config():
    async def main():
        async with FakeTritonHttp() as t:
            client = HttpTritonClient(t.url)
            models = await client.list_models()
            await client.close()
            return models

    llm, broken = run(main())
    assert (llm.name, llm.version, llm.ready, llm.backend) == ("llm", "1", True, "vllm")
    assert llm.parameters == {"vllm_runner": "generate"} and llm.outputs == ("text_output",)
    assert (broken.name, broken.ready, broken.parameters) == ("broken", False, {})


@pytest.mark.parametrize("url", ["https://x:1", "http://", "ftp://x"])
def test_rejects_urls_it_cannot_serve(url):
    with pytest.raises(ValueError):
        HttpTritonClient(url)


@pytest.mark.parametrize("status, error, raised", [
    (200, None, None),
    (400, f"[unavailable] engine died; the server {wire.DEAD_PHRASE}",
     (503, f"engine died; the server {wire.DEAD_PHRASE}")),
    (400, "Stub process 'llm_0_0' is not healthy.",
     (503, "Stub process 'llm_0_0' is not healthy.")),
])
def test_model_health_asks_the_backends_health_check(status, error, raised):
    async def main():
        async with FakeTritonHttp(status=status, error=error) as t:
            client = HttpTritonClient(t.url)
            try:
                await client.model_health("llm")
                got = None
            except TritonError as err:
                got = (err.status, err.message)
            await client.close()
            return got, t.requests

    got, requests = run(main())
    assert got == raised
    assert requests == [("POST /v2/models/llm/generate",
                         {"parameters": {wire.HEALTH_PARAMETER: True}})]


def test_a_health_check_given_up_on_closes_its_connection():
    async def main():
        async with FakeTritonHttp(silent=True) as t:
            client = HttpTritonClient(t.url)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.model_health("llm"), 0.2)
            await asyncio.wait_for(t.left_early.wait(), 2)
            await client.close()

    run(main())

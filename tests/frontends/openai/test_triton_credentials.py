"""The keys of a tritonserver with restricted APIs, as the HTTP and gRPC clients send them
(each to the API that asks for it), against fakes that record what arrives."""

from __future__ import annotations

import asyncio
import json

import pytest

from triton_openai.triton import credentials as creds
from triton_openai.triton.credentials import CredentialsError, TritonCredentials
from triton_openai.triton.grpc_client import GrpcTritonClient
from triton_openai.triton.http_client import HttpTritonClient
from triton_openai.triton.select import create_client

KEYS = TritonCredentials(model_control_key="control", api_key="s3cret")
CONTROL = ("triton-model-control-key", "control")
BEARER = ("authorization", "Bearer s3cret")


@pytest.mark.parametrize("environ, api_key, expected", [
    ({"TRITON_MODEL_CONTROL_KEY": "control"}, "s3cret", KEYS),
    ({"TRITON_MODEL_CONTROL_KEY": ""}, "", TritonCredentials()),
    ({}, None, TritonCredentials()),
])
def test_the_model_control_key_comes_from_the_environment(environ, api_key, expected):
    assert TritonCredentials.from_environment(api_key, environ) == expected


def test_each_api_gets_its_own_header():
    assert KEYS.repository_headers() == (CONTROL,)
    assert KEYS.inference_headers() == (BEARER,)
    assert TritonCredentials().repository_headers() == TritonCredentials().inference_headers() == ()
    # Triton reads a restricted API's key over gRPC from metadata of a prefixed name.
    assert creds.grpc_metadata(KEYS.inference_headers()) == (
        ("triton-grpc-protocol-authorization", "Bearer s3cret"),)


@pytest.mark.parametrize("fields, message", [
    ({"model_control_key": "a\r\nx-injected: 1"},
     "$TRITON_MODEL_CONTROL_KEY must be printable ASCII without leading or trailing spaces: "
     "Triton compares it as a header value"),
    ({"api_key": " padded"}, "the API key must be printable ASCII without leading or "
                             "trailing spaces: Triton compares it as a header value"),
    ({"api_key": "clé"}, "the API key must be printable ASCII without leading or trailing "
                         "spaces: Triton compares it as a header value"),
])
def test_a_key_that_cannot_travel_in_a_header_is_refused(fields, message):
    with pytest.raises(CredentialsError) as err:
        TritonCredentials(**fields)
    assert str(err.value) == message


def test_create_client_hands_both_keys_to_the_client(monkeypatch):
    monkeypatch.setenv("TRITON_MODEL_CONTROL_KEY", "control")
    http = create_client("http://triton:8000", api_key="s3cret")
    assert (http._repository_headers, http._inference_headers) == ((CONTROL,), (BEARER,))
    grpc_client = create_client("triton:8001", api_key="s3cret")
    assert grpc_client._repository_metadata == (("triton-grpc-protocol-" + CONTROL[0],
                                                 CONTROL[1]),)


def test_the_backends_watch_sends_the_same_keys():
    """The model watch (the vLLM backend's) and the frontend face one tritonserver."""
    from triton_vllm_backend import access

    from triton_openai.cli import API_KEY_ENV

    assert (access.MODEL_CONTROL_KEY_ENV, access.MODEL_CONTROL_HEADER) == (
        creds.MODEL_CONTROL_KEY_ENV, creds.MODEL_CONTROL_HEADER)
    assert access.API_KEY_ENV == API_KEY_ENV  # the watch's bearer is the frontend's key
    keys = access.Keys("control", "s3cret")
    assert tuple(keys.repository_headers().items()) == KEYS.repository_headers()
    assert tuple(keys.inference_headers().items()) == KEYS.inference_headers()


def test_the_images_restrictions_ask_for_these_headers(plan_for_image):
    from tritonbuild.pipeline.components.tritonserver import api_key_args, server_args

    plan = plan_for_image
    restricted = [a for a in server_args(plan) + api_key_args(plan) if "restricted" in a]
    assert {a.split(":", 1)[1].split("=", 1)[0] for a in restricted} >= {
        creds.MODEL_CONTROL_HEADER, creds.AUTHORIZATION_HEADER}
    assert any(a.endswith(f"{creds.AUTHORIZATION_HEADER}=Bearer ${{TRITON_OPENAI_API_KEY}}")
               for a in restricted)


@pytest.fixture
def plan_for_image():
    from tritonbuild.hostenv import REPO_ROOT, HostFacts
    from tritonbuild.pipeline.flags import parse_flags
    from tritonbuild.pipeline.validate import make_plan

    host = HostFacts(repo_root=REPO_ROOT, pip_cert=None, pip_cert_origin="",
                     find_links=None, find_links_origin="")
    return make_plan(parse_flags(["--endpoint=openai", "--enable-gpu"]), host)


# --- the HTTP client ------------------------------------------------------------------------

class RecordingTritonHttp:
    """Answers the catalog's requests, generate_stream with one event and generate (the
    health check) with an empty answer; records each request's path and headers."""

    CONFIG = {"backend": "vllm", "output": [{"name": "text_output"}], "parameters": {}}

    def __init__(self):
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    def headers_of(self, path_end: str) -> set[tuple[str, str]]:
        [headers] = [h for path, h in self.seen if path.endswith(path_end)]
        return {(k, v) for k, v in headers.items() if k in (CONTROL[0], BEARER[0])}

    async def _serve(self, reader, writer):
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode().split("\r\n")
                path = lines[0].split(" ")[1]
                headers = dict(line.split(": ", 1) for line in lines[1:] if line)
                headers = {k.lower(): v for k, v in headers.items()}
                await reader.readexactly(int(headers.get("content-length", 0)))
                self.seen.append((path, headers))
                body, kind = {
                    "/v2/repository/index": (json.dumps([{"name": "llm", "state": "READY"}]),
                                             "application/json"),
                    "/v2/models/llm/config": (json.dumps(self.CONFIG), "application/json"),
                    "/v2/models/llm/generate": ("{}", "application/json"),
                    "/v2/models/llm/generate_stream": ('data: {"text_output": "x"}\n\n',
                                                       "text/event-stream"),
                }[path]
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
                await writer.drain()
        finally:
            writer.close()


def test_http_client_sends_each_key_to_the_api_that_asks_for_it():
    async def main():
        async with RecordingTritonHttp() as fake:
            client = HttpTritonClient(fake.url, KEYS)
            assert [m.name for m in await client.list_models()] == ["llm"]
            assert [r async for r in client.stream_infer("llm", [], [], "r1")][-1].final
            await client.model_health("llm")
            await client.close()
            return fake

    fake = asyncio.run(main())
    assert fake.headers_of("/repository/index") == {CONTROL}
    assert fake.headers_of("/llm/config") == set()
    assert fake.headers_of("/generate_stream") == {BEARER}
    assert fake.headers_of("/generate") == {BEARER}


def test_http_client_without_keys_sends_none():
    async def main():
        async with RecordingTritonHttp() as fake:
            client = HttpTritonClient(fake.url)
            await client.list_models()
            await client.model_health("llm")
            await client.close()
            return fake

    fake = asyncio.run(main())
    assert fake.headers_of("/repository/index") == fake.headers_of("/generate") == set()


# --- the gRPC client ------------------------------------------------------------------------

class RecordingTritonGrpc:
    """Answers RepositoryIndex, ModelConfig and ModelStreamInfer (a generation streams until
    it is cancelled; an abort and a health check get an empty final response), recording
    the metadata of each call."""

    def __init__(self):
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        self.seen: list[tuple[str, set[tuple[str, str]]]] = []
        fake = self

        def record(name, context):
            fake.seen.append((name, {(m.key, m.value) for m in context.invocation_metadata()
                                     if m.key.startswith(creds.GRPC_PREFIX)}))

        class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
            async def RepositoryIndex(self, request, context):
                record("RepositoryIndex", context)
                reply = service_pb2.RepositoryIndexResponse()
                reply.models.add(name="llm", state="READY")
                return reply

            async def ModelConfig(self, request, context):
                record("ModelConfig", context)
                reply = service_pb2.ModelConfigResponse()
                reply.config.backend = "vllm"
                return reply

            async def ModelStreamInfer(self, request_iterator, context):
                async for request in request_iterator:
                    special = "vllm_abort_request_id" in request.parameters or (
                        "vllm_health_check" in request.parameters)
                    record("abort or health" if special else "generation", context)
                    while True:
                        r = service_pb2.ModelStreamInferResponse()
                        r.infer_response.parameters["triton_final_response"].bool_param = special
                        yield r
                        if special:
                            break
                        await asyncio.sleep(0.01)

        self.servicer = Servicer()

    async def __aenter__(self):
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        self.server = grpc.aio.server()
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(self.servicer, self.server)
        self.url = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        await self.server.start()
        return self

    async def __aexit__(self, *exc):
        await self.server.stop(None)


@pytest.mark.parametrize("keys, control, bearer", [
    (KEYS, {("triton-grpc-protocol-triton-model-control-key", "control")},
     {("triton-grpc-protocol-authorization", "Bearer s3cret")}),
    (TritonCredentials(), set(), set()),
])
def test_grpc_client_sends_each_key_to_the_api_that_asks_for_it(keys, control, bearer):
    async def main():
        async with RecordingTritonGrpc() as fake:
            client = GrpcTritonClient(fake.url, keys)
            assert [m.name for m in await client.list_models()] == ["llm"]
            stream = client.stream_infer("llm", [], [], "r1")
            await anext(stream)
            await stream.aclose()  # left early: the client aborts the request
            await client.model_health("llm")
            await client.close()
            return fake.seen

    seen = asyncio.run(main())
    assert sorted(seen) == sorted([
        ("RepositoryIndex", control), ("ModelConfig", set()), ("generation", bearer),
        ("abort or health", bearer), ("abort or health", bearer)])


# --- a key that Triton refuses ----------------------------------------------------------------

def test_a_refused_key_is_the_deployments_fault_not_the_clients():
    """Triton answers a restricted API without its key with HTTP 403, or gRPC UNAVAILABLE
    (tritonserver 2.51's words): neither is the client's error, nor passes with a retry."""
    import grpc

    from triton_openai.triton.grpc_client import _rpc_error
    from triton_openai.triton.http_client import _status_error

    refused = _status_error(403, b'{"error":"This API is restricted, expecting header '
                                 b'\'authorization\'"}')
    assert (refused.status, refused.message) == (
        500, "This API is restricted, expecting header 'authorization'")

    class Refused(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return ("This protocol is restricted, expecting header "
                    "'triton-grpc-protocol-authorization'")

    assert (_rpc_error(Refused()).status, _rpc_error(Refused()).message) == (
        500, Refused().details())

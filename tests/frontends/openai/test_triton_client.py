"""Tensor encoding, the backend contract, and how the client is chosen."""

import asyncio

import pytest

from triton_openai.triton import vllm_io
from triton_openai.triton.client import InferResponse, Tensor, deserialize_bytes, serialize_bytes
from triton_openai.triton.select import ClientSelectionError, choose_client_kind


def test_bytes_roundtrip():
    values = [b"", b"abc", "é".encode()]
    assert deserialize_bytes(serialize_bytes(values)) == values


def test_build_inputs_prefers_token_ids():
    req = vllm_io.GenerationRequest("m", "r", {"max_tokens": 3}, True, "hi", [1, 2], logprobs=True)
    inputs, outputs = vllm_io.build_inputs(req)
    names = [t.name for t in inputs]
    assert "input_ids" in names and "text_input" not in names
    assert "logprobs" in outputs
    ids = next(t for t in inputs if t.name == "input_ids")
    assert ids.datatype == "INT64" and ids.shape == (2,) and ids.as_list() == [1, 2]


def test_build_inputs_asks_for_the_prompt_length_only_when_not_known():
    with_ids = vllm_io.GenerationRequest("m", "r", {}, True, None, [1, 2])
    text_only = vllm_io.GenerationRequest("m", "r", {}, True, "hi", None)
    for req, wanted in ((with_ids, False), (text_only, True)):
        inputs, outputs = vllm_io.build_inputs(req)
        flag = next(t for t in inputs if t.name == "return_num_input_tokens")
        assert flag.as_list() == [wanted] and ("num_input_tokens" in outputs) == wanted


def test_merge_chunks_joins_each_choice():
    a = vllm_io.GenerationChunk([
        vllm_io.ChoiceDelta(0, "Hel", None, 1, [vllm_io.TokenLogprob("Hel", 1, -0.5)]),
        vllm_io.ChoiceDelta(1, "A", None, 1)], None, False)
    b = vllm_io.GenerationChunk([
        vllm_io.ChoiceDelta(0, "lo", "length", 2, [vllm_io.TokenLogprob("lo", 2, -0.1)]),
        vllm_io.ChoiceDelta(2, "z", None, 1)], 7, True)
    m = vllm_io.merge_chunks(a, b)
    assert [(c.index, c.text, c.finish_reason, c.num_output_tokens) for c in m.choices] == [
        (0, "Hello", "length", 3), (1, "A", None, 1), (2, "z", None, 1)]
    assert [t.token for t in m.choices[0].logprobs] == ["Hel", "lo"]
    assert m.num_input_tokens == 7 and m.final


class _Responses:
    """A TritonClient whose stream yields the given responses, then maybe an error."""

    def __init__(self, responses, error=None):
        self.responses, self.error = responses, error

    async def stream_infer(self, model, inputs, outputs, request_id):
        for r in self.responses:
            yield r
        if self.error:
            raise self.error


def _text(t: str, more=False, final=False):
    return InferResponse({"text_output": Tensor.bytes_("text_output", [t]),
                          "num_output_tokens": Tensor.int64s("num_output_tokens", [1])},
                         final, more)


def test_generate_merges_responses_that_arrived_together():
    async def main(client):
        req = vllm_io.GenerationRequest("m", "r", {}, True, "hi")
        return [c async for c in vllm_io.generate(client, req)]

    chunks = asyncio.run(main(_Responses([
        _text("a"), _text("b", more=True), _text("c", more=True), _text("d"),
        InferResponse({}, True)])))
    assert [([c.text for c in ch.choices], ch.final) for ch in chunks] == [
        (["a"], False), (["bcd"], False), ([], True)]
    assert chunks[1].choices[0].num_output_tokens == 3


def test_generate_hands_on_merged_text_before_an_error():
    from triton_openai.triton.client import TritonError

    async def main(client):
        req = vllm_io.GenerationRequest("m", "r", {}, True, "hi")
        got = []
        with pytest.raises(TritonError):
            async for c in vllm_io.generate(client, req):
                got.append(c)
        return got

    got = asyncio.run(main(_Responses([_text("a", more=True)], TritonError("boom", 500))))
    assert [c.choices[0].text for c in got] == ["a"]


def test_parse_response_n_choices():
    resp = InferResponse({
        "text_output": Tensor.bytes_("text_output", ["a", "b", "c"]),
        "finish_reason": Tensor.bytes_("finish_reason", ["", "stop", "length"]),
        "num_input_tokens": Tensor.int64s("num_input_tokens", [5]),
        "num_output_tokens": Tensor.int64s("num_output_tokens", [1, 2, 3]),
    }, final=False)
    chunk = vllm_io.parse_response(resp, 3)
    assert [c.text for c in chunk.choices] == ["a", "b", "c"]
    assert [c.finish_reason for c in chunk.choices] == [None, "stop", "length"]
    assert chunk.num_input_tokens == 5


def test_parse_logprobs_shapes():
    a = vllm_io.parse_logprobs('[{"id": 1, "logprob": -1.0, "token": "x", '
                               '"top_logprobs": [{"id": 2, "logprob": -2.0, "token": "y"}]}]')
    b = vllm_io.parse_logprobs('[{"token_id": 1, "logprob": -1.0, "decoded_token": "x", '
                               '"top_logprobs": {"2": {"logprob": -2.0, "decoded_token": "y"}}}]')
    assert a[0].token == b[0].token == "x"
    assert a[0].top == b[0].top == [("y", -2.0)]


@pytest.mark.parametrize("url, expected", [
    ("localhost:8001", "grpc"),
    ("grpc://triton:8001", "grpc"),
    ("http://triton:8000", "http"),
])
def test_choose_client_kind(url, expected):
    assert choose_client_kind(url) == expected


@pytest.mark.parametrize("url", [
    None,  # nothing to talk to
    "https://triton:8000",  # no TLS
    "unix:///tmp/triton.sock",
])
def test_choose_client_kind_errors(url):
    with pytest.raises(ClientSelectionError):
        choose_client_kind(url)


# --- the gRPC client against an in-process fake of Triton's stream endpoint -------------

class _FakeStreamServer:
    """Answers ModelStreamInfer: generation requests get a response every 10 ms until they
    are cancelled (or `final_after` responses, the last one final), or with `error` in
    the stream; abort requests (the vLLM backend's parameter) are recorded and get an
    empty final response, as do health checks (or `error`)."""

    def __init__(self, final_after=None, error=None):
        from tritonclient.grpc import service_pb2_grpc

        self.final_after, self.error = final_after, error
        self.aborted: list[str] = []
        self.health_asked: list[str] = []
        fake = self

        class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
            async def ModelStreamInfer(self, request_iterator, context):
                from tritonclient.grpc import service_pb2

                async for request in request_iterator:
                    def reply(final, request=request):
                        r = service_pb2.ModelStreamInferResponse()
                        r.infer_response.id = request.id
                        r.infer_response.parameters["triton_final_response"].bool_param = final
                        return r

                    target = request.parameters.get("vllm_abort_request_id")
                    if target is not None:
                        fake.aborted.append(target.string_param)
                        yield reply(True)
                        continue
                    health = request.parameters.get("vllm_health_check")
                    if health is not None and health.bool_param:
                        fake.health_asked.append(request.model_name)
                        yield (service_pb2.ModelStreamInferResponse(error_message=fake.error)
                               if fake.error is not None else reply(True))
                        continue
                    if fake.error is not None:
                        yield service_pb2.ModelStreamInferResponse(error_message=fake.error)
                        continue
                    i = 0
                    while fake.final_after is None or i < fake.final_after:
                        i += 1
                        yield reply(fake.final_after == i)
                        await asyncio.sleep(0.01)

        self.servicer = Servicer()

    async def __aenter__(self):
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        self.server = grpc.aio.server()
        service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return self

    async def __aexit__(self, *exc):
        await self.server.stop(None)


async def _read_some(client, responses):
    stream = client.stream_infer("m", [], ["text_output"], "req-1")
    seen = 0
    async for _ in stream:
        seen += 1
        if seen == responses:
            break
    await stream.aclose()
    return seen


def test_grpc_client_sends_an_abort_when_the_caller_leaves_early():
    from triton_openai.triton.grpc_client import GrpcTritonClient

    async def main():
        async with _FakeStreamServer() as fake:
            client = GrpcTritonClient(f"127.0.0.1:{fake.port}")
            assert await _read_some(client, 2) == 2
            await client.close()  # waits for the abort requests in flight
            return fake.aborted

    assert asyncio.run(main()) == ["req-1"]


def test_grpc_client_sends_no_abort_after_the_final_response():
    from triton_openai.triton.grpc_client import GrpcTritonClient

    async def main():
        async with _FakeStreamServer(final_after=3) as fake:
            client = GrpcTritonClient(f"127.0.0.1:{fake.port}")
            assert await _read_some(client, 100) == 3
            await client.close()
            return fake.aborted

    assert asyncio.run(main()) == []


@pytest.mark.parametrize("sent, message, status", [
    ("[invalid_argument] unknown sampling parameter 'x'", "unknown sampling parameter 'x'", 400),
    ("[unavailable] the engine died", "the engine died", 503),
    ("Stub process 'm_0_0' is not healthy.", "Stub process 'm_0_0' is not healthy.", 503),
])
def test_grpc_client_reads_the_kind_of_an_error_in_the_stream(sent, message, status):
    from triton_openai.triton.client import TritonError
    from triton_openai.triton.grpc_client import GrpcTritonClient

    async def main():
        async with _FakeStreamServer(error=sent) as fake:
            client = GrpcTritonClient(f"127.0.0.1:{fake.port}")
            with pytest.raises(TritonError) as err:
                await _read_some(client, 1)
            await client.close()
            return err.value

    err = asyncio.run(main())
    assert (err.status, err.message) == (status, message)


@pytest.mark.parametrize("error, status", [
    (None, None),
    ("[unavailable] the vLLM engine of model 'm' died; the server cannot serve it until it "
     "is restarted", 503),
    ("Stub process 'm_0_0' is not healthy.", 503),
])
def test_grpc_client_asks_the_backends_health_check(error, status):
    from triton_openai.triton.client import TritonError
    from triton_openai.triton.grpc_client import GrpcTritonClient

    async def main():
        async with _FakeStreamServer(error=error) as fake:
            client = GrpcTritonClient(f"127.0.0.1:{fake.port}")
            try:
                await client.model_health("m")
                got = None
            except TritonError as err:
                got = err.status
            await client.close()
            return got, fake.health_asked

    assert asyncio.run(main()) == (status, ["m"])

"""tritonserver with the image's restrictions of its APIs, on the tiny model: the
model-repository API (with shared memory, trace, logging) answers only with the
model-control key, KServe inference only with the API key, over HTTP and gRPC; the model
watch and the OpenAI frontend's Triton clients send both and are answered.

The flags are the image's own (tritonbuild's server_args and api_key_args, with the keys
the entrypoint would put in), so that this is what the image runs.
"""

from __future__ import annotations

import asyncio
import re

import grpc
import httpx
import pytest
from triton_vllm_backend import access, watch
from tritonclient.grpc import service_pb2, service_pb2_grpc

from qa.common import TritonServer, write_vllm_model
from triton_openai.triton.client import TritonError
from triton_openai.triton.credentials import TritonCredentials
from triton_openai.triton.grpc_client import GrpcTritonClient
from triton_openai.triton.http_client import HttpTritonClient

from .vllm_suite import MODEL, engine_args, generate_body

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CONTROL_KEY = "control-key"
API_KEY = "s3cret key"  # a space: Triton compares the whole `Bearer ...` value
KEYS = {"TRITON_MODEL_CONTROL_KEY": CONTROL_KEY, "TRITON_OPENAI_API_KEY": API_KEY}
CONTROL = {"triton-model-control-key": CONTROL_KEY}
BEARER = {"authorization": f"Bearer {API_KEY}"}


def image_restrictions() -> list[str]:
    """The image's restricted-API flags, as its entrypoint passes them with KEYS set."""
    from tritonbuild.hostenv import REPO_ROOT, HostFacts
    from tritonbuild.pipeline.components.tritonserver import api_key_args, server_args
    from tritonbuild.pipeline.flags import parse_flags
    from tritonbuild.pipeline.validate import make_plan

    # The GPU flavor's plan needs no wheelhouse; its restrictions are the CPU image's.
    host = HostFacts(repo_root=REPO_ROOT, pip_cert=None, pip_cert_origin="",
                     find_links=None, find_links_origin="")
    plan = make_plan(parse_flags(["--endpoint=openai", "--enable-gpu"]), host)
    flags = [a for a in server_args(plan) + api_key_args(plan)
             if a.startswith(("--http-restricted-api=", "--grpc-restricted-protocol="))
             and "statistics" not in a]
    return [re.sub(r"\$\{(\w+)\}", lambda m: KEYS[m.group(1)], a) for a in flags]


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model):
    repo = tmp_path_factory.mktemp("repository")
    write_vllm_model(repo, MODEL, {**engine_args(tiny_model), "max_model_len": 256})
    args = ["--model-control-mode=explicit", "--load-model=*", *image_restrictions()]
    with TritonServer(repo, mounts=[tiny_model], server_args=args) as running:
        yield running


def post(server, path, headers=None, **body) -> httpx.Response:
    return httpx.post(f"{server.http_url}{path}", json=body, headers=headers, timeout=120)


def grpc_stub(server):
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))


def metadata(headers: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((f"triton-grpc-protocol-{k}", v) for k, v in headers.items())


def test_the_repository_api_answers_only_with_the_model_control_key(server):
    refused = post(server, "/v2/repository/index")
    assert (refused.status_code, refused.json()) == (403, {
        "error": "This API is restricted, expecting header 'triton-model-control-key'"})
    assert post(server, "/v2/repository/index", {"triton-model-control-key": "guess"}
                ).status_code == 403
    index = post(server, "/v2/repository/index", CONTROL)
    assert index.status_code == 200 and [m["name"] for m in index.json()] == [MODEL]
    load = f"/v2/repository/models/{MODEL}/load"
    assert post(server, load).status_code == 403
    assert post(server, load, CONTROL).status_code == 200  # unchanged: nothing reloads
    logging = f"{server.http_url}/v2/logging"
    assert httpx.get(logging).status_code == 403
    assert httpx.get(logging, headers=CONTROL).status_code == 200


def test_the_repository_api_over_grpc_answers_only_with_the_model_control_key(server):
    stub = grpc_stub(server)
    with pytest.raises(grpc.RpcError) as refused:
        stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=30)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert refused.value.details() == ("This protocol is restricted, expecting header "
                                       "'triton-grpc-protocol-triton-model-control-key'")
    with pytest.raises(grpc.RpcError):
        stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name=MODEL),
                                 timeout=30)
    index = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=30,
                                 metadata=metadata(CONTROL))
    assert [m.name for m in index.models] == [MODEL]


def test_kserve_inference_answers_only_with_the_api_key(server):
    body = generate_body("Hello", {"max_tokens": 2})
    for path in (f"/v2/models/{MODEL}/generate", f"/v2/models/{MODEL}/generate_stream"):
        refused = post(server, path, **body)
        assert (refused.status_code, refused.json()) == (403, {
            "error": "This API is restricted, expecting header 'authorization'"})
        assert post(server, path, {"authorization": "Bearer s3cret"}, **body
                    ).status_code == 403
    answered = post(server, f"/v2/models/{MODEL}/generate", BEARER, **body)
    assert answered.status_code == 200 and "text_output" in answered.json()
    # Readiness stays open: probes and load balancers send no key.
    assert httpx.get(f"{server.http_url}/v2/models/{MODEL}/ready").status_code == 200


def test_the_model_watch_sends_both_keys(server):
    assert watch.check_once(watch.Server(server.http_url, 30, access.Keys(CONTROL_KEY, API_KEY)),
                            print) == 0
    logged = []
    assert watch.check_once(watch.Server(server.http_url, 30), logged.append) == 1
    assert "expecting header 'triton-model-control-key'" in logged[0]
    # A health check refused for want of the API key is not a dead model.
    answer = watch.Server(server.http_url, 30, access.Keys(CONTROL_KEY)).health(MODEL)
    assert not answer.healthy and not answer.dead


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_the_frontends_triton_clients_send_both_keys(server, transport):
    def client(credentials=None):
        if transport == "http":
            return HttpTritonClient(server.http_url, credentials)
        return GrpcTritonClient(server.grpc_url, credentials)

    async def main():
        keyed = client(TritonCredentials(CONTROL_KEY, API_KEY))
        models = await keyed.list_models()
        await keyed.model_health(MODEL)
        await keyed.close()
        bare = client()
        with pytest.raises(TritonError) as refused:
            await bare.list_models()
        await bare.close()
        return models, refused.value

    models, refused = asyncio.run(main())
    assert [(m.name, m.ready, m.backend) for m in models] == [(MODEL, True, "vllm")]
    # The deployment's fault (a key missing or wrong), not the client's, nor passing.
    assert refused.status == 500
    assert "restricted" in refused.message and "triton-model-control-key" in refused.message

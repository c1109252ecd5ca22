"""Every surface of the Triton pod that can change the server, or spend its engine, asks for
a key: Triton's model-repository API (which loads code: a Python model with `file:`
overrides) on HTTP and gRPC, its statistics, and, with an API key set, its KServe
inference endpoints.  Health stays open, for probes and load balancers."""

from __future__ import annotations

import json

import httpx
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from triton_openai.triton.credentials import GRPC_PREFIX, MODEL_CONTROL_HEADER

from .conftest import MODEL, Target

pytestmark = pytest.mark.docker

# What an attacker sends: each call of Triton's repository API, over HTTP.
REPOSITORY_CALLS = [
    ("POST", "/v2/repository/index", {}),
    ("POST", f"/v2/repository/models/{MODEL}/unload", {}),
    ("POST", "/v2/repository/models/evil/load",
     {"parameters": {"config": json.dumps({"backend": "python"}),
                     "file:1/model.py": "aW1wb3J0IG9z"}}),
]


def http(target: Target, method: str, path: str, body: dict | None = None,
         headers: dict | None = None) -> httpx.Response:
    return httpx.request(method, target.url("http") + path, json=body, headers=headers,
                         timeout=60)


@pytest.mark.parametrize("method,path,body", REPOSITORY_CALLS,
                         ids=[c[1].rsplit("/", 1)[-1] for c in REPOSITORY_CALLS])
@pytest.mark.parametrize("key", [None, "wrong"], ids=["no key", "wrong key"])
def test_the_repository_api_refuses_a_client_without_the_key(target, method, path, body, key):
    headers = {MODEL_CONTROL_HEADER: key} if key else None
    answer = http(target, method, path, body, headers)
    assert answer.status_code == 403, (answer.status_code, answer.text)
    # The model is still served: nothing was unloaded.
    assert http(target, "GET", f"/v2/models/{MODEL}/ready").status_code == 200


def test_the_repository_api_answers_the_key(target):
    answer = http(target, "POST", "/v2/repository/index", {},
                  {MODEL_CONTROL_HEADER: target.model_control_key})
    assert answer.status_code == 200, answer.text
    assert {m["name"] for m in answer.json()} >= {MODEL}


def test_the_repository_api_over_grpc_refuses_a_client_without_the_key(target):
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{target.server.port_of('grpc')}")
    try:
        for call in (lambda **kw: client.get_model_repository_index(**kw),
                     lambda **kw: client.unload_model(MODEL, **kw)):
            with pytest.raises(InferenceServerException) as refused:
                call()
            assert "restricted" in str(refused.value).lower(), refused.value
        index = client.get_model_repository_index(
            headers={GRPC_PREFIX + MODEL_CONTROL_HEADER: target.model_control_key},
            as_json=True)
        assert MODEL in {m["name"] for m in index["models"]}
        assert client.is_model_ready(MODEL)
    finally:
        client.close()


def test_kserve_inference_asks_for_the_api_key(target):
    body = {"text_input": "Hello", "parameters": {"max_tokens": 2}}
    path = f"/v2/models/{MODEL}/generate"
    refused = http(target, "POST", path, body)
    assert refused.status_code in (401, 403), (refused.status_code, refused.text)
    wrong = http(target, "POST", path, body, {"Authorization": "Bearer wrong"})
    assert wrong.status_code in (401, 403), (wrong.status_code, wrong.text)
    answered = http(target, "POST", path, body, {"Authorization": f"Bearer {target.api_key}"})
    assert answered.status_code == 200, answered.text
    assert answered.json()["text_output"]


def test_kserve_inference_over_grpc_asks_for_the_api_key(target):
    import numpy as np

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{target.server.port_of('grpc')}")
    text = grpcclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([b"Hello"], dtype=object))
    try:
        with pytest.raises(InferenceServerException) as refused:
            client.infer(MODEL, [text], parameters={"max_tokens": 2})
        assert "restricted" in str(refused.value).lower(), refused.value
    finally:
        client.close()


def test_statistics_stay_closed(target):
    answer = http(target, "GET", f"/v2/models/{MODEL}/stats")
    assert answer.status_code == 403, answer.text


def test_health_stays_open_for_probes(target):
    assert http(target, "GET", "/v2/health/ready").status_code == 200
    assert httpx.get(target.url("openai") + "/health/ready", timeout=30).status_code == 200

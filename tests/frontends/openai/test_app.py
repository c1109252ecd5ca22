"""Routes, errors and middlewares of the app, against a fake Triton."""

import pytest
from openai_fakes import FakeTriton

from qa.common.metrics import series_total
from triton_openai import FrontendConfig
from triton_openai.triton.client import TritonError
from triton_openai.web.errors import OpenAIError


def _error_shape(resp, status, param=None):
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"]
    if param is not None:
        assert err["param"] == param
    return err


def test_models_lists_only_vllm_models(client):
    data = client.get("/v1/models").json()
    assert data["object"] == "list"
    assert sorted(m["id"] for m in data["data"]) == ["embed", "llm"]
    assert client.get("/v1/models/llm").json()["max_model_len"] == 64


def test_unknown_model_is_404(client):
    err = _error_shape(client.get("/v1/models/nope"), 404, "model")
    assert err["code"] == "model_not_found"
    _error_shape(client.post("/v1/completions", json={"model": "nope", "prompt": "a"}), 404, "model")


def test_served_model_name_mapping(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, served_model_names={"llm": "public"}))
    assert sorted(m["id"] for m in c.get("/v1/models").json()["data"]) == ["embed", "public"]
    r = c.post("/v1/completions", json={"model": "public", "prompt": "a b", "max_tokens": 2})
    assert r.json()["model"] == "public"


def test_bad_parameter_names_it(client):
    err = _error_shape(client.post("/v1/chat/completions", json={
        "model": "llm", "messages": [{"role": "user", "content": "hi"}], "temperature": 5}),
        400, "temperature")
    assert err["type"] == "invalid_request_error"
    _error_shape(client.post("/v1/completions", json={"model": "llm"}), 400, "prompt")


def test_invalid_json_is_400(client):
    _error_shape(client.post("/v1/completions", content=b"{not json",
                             headers={"content-type": "application/json"}), 400)


def test_context_length_exceeded(client):
    err = _error_shape(client.post("/v1/completions", json={
        "model": "llm", "prompt": "a b c", "max_tokens": 62}), 400, "max_tokens")
    assert err["code"] == "context_length_exceeded"


def test_api_key(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, api_key="sekret"))
    err = _error_shape(c.get("/v1/models"), 401)
    assert err["code"] == "invalid_api_key"
    _error_shape(c.get("/v1/models", headers={"Authorization": "Bearer wrong"}), 401)
    assert c.get("/v1/models", headers={"Authorization": "Bearer sekret"}).status_code == 200
    # Probes stay open.
    assert c.get("/health/live").status_code == 200


def test_body_limit(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, max_request_bytes=100))
    _error_shape(c.post("/v1/completions", json={"model": "llm", "prompt": "x" * 200}), 413)


def test_cors(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, cors_origins=["http://ui.example"]))
    r = c.options("/v1/chat/completions", headers={
        "Origin": "http://ui.example", "Access-Control-Request-Method": "POST"})
    assert r.headers["access-control-allow-origin"] == "http://ui.example"


def test_not_ready_is_503(make_client):
    from openai_fakes import FakeTriton

    fake = FakeTriton(ready=False)
    c = make_client(fake=fake)
    assert c.get("/health/ready").status_code == 503
    assert c.get("/health/live").status_code == 200
    _error_shape(c.post("/v1/completions", json={"model": "llm", "prompt": "a"}), 503)


def test_triton_request_error_is_400(client, triton):
    triton.fail = TritonError("invalid sampling parameter 'top_p'", 400)
    _error_shape(client.post("/v1/completions", json={"model": "llm", "prompt": "a"}), 400)


def test_unknown_route_has_openai_shape(client):
    _error_shape(client.get("/v1/nothing"), 404)


def test_metrics_counts_requests(client):
    client.get("/v1/models")
    page = client.get("/metrics").text
    assert series_total(page, "openai_frontend_requests_total", method="GET",
                        path="/v1/models", status="200") == 1


def test_embeddings_float_and_base64(client, triton):
    import base64
    import struct

    r = client.post("/v1/embeddings", json={"model": "embed", "input": ["ab cd", "x"]}).json()
    assert [d["index"] for d in r["data"]] == [0, 1]
    assert r["data"][0]["embedding"] == [5.0, 1.0, -0.5]
    assert r["usage"]["prompt_tokens"] == 3
    b = client.post("/v1/embeddings", json={"model": "embed", "input": "ab cd",
                                           "encoding_format": "base64"}).json()
    vec = struct.unpack("<3f", base64.b64decode(b["data"][0]["embedding"]))
    assert list(vec) == [5.0, 1.0, -0.5]
    _error_shape(client.post("/v1/embeddings", json={"model": "llm", "input": "a"}), 400, "model")
    ids = client.post("/v1/embeddings", json={"model": "embed", "input": [1, 2, 3]}).json()
    assert len(ids["data"]) == 1 and "input_ids" in triton.requests[-1]


def test_shutdown_closes_triton_client(make_client, triton):
    c = make_client()
    c.__exit__(None, None, None)
    assert triton.closed


def test_runner_from_outputs_without_discovery_parameters(make_client):
    """A config.pbtxt that does not write vllm_runner: the outputs tell an embedding model."""
    from openai_fakes import FakeTriton

    from triton_openai.triton.client import ModelInfo

    fake = FakeTriton(models=[
        ModelInfo("gen", "1", True, {}, "vllm", ("text_output", "finish_reason")),
        ModelInfo("emb", "1", True, {}, "vllm", ("embedding", "num_input_tokens")),
        ModelInfo("python_model", "1", True, {}, "python", ("OUT",)),
    ])
    c = make_client(fake=fake)
    assert sorted(m["id"] for m in c.get("/v1/models").json()["data"]) == ["emb", "gen"]
    assert c.post("/v1/embeddings", json={"model": "emb", "input": "a b"}).status_code == 200
    assert c.post("/v1/embeddings", json={"model": "gen", "input": "a"}).status_code == 400


def test_triton_error_before_streaming_is_an_http_status(client, triton):
    triton.fail = TritonError("invalid sampling parameter 'top_k'", 400)
    for path, body in [("/v1/completions", {"prompt": "a"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}]})]:
        r = client.post(path, json=dict(body, model="llm", stream=True))
        _error_shape(r, 400)


def test_the_api_schema_shows_the_request_bodies_and_the_error_shape(client):
    schema = client.get("/openapi.json").json()
    chat = schema["paths"]["/v1/chat/completions"]["post"]
    # cancel_on_disconnect keeps the route's signature: the body is still a request model.
    assert chat["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ChatCompletionRequest"}
    for path, method in (("/v1/chat/completions", "post"), ("/v1/completions", "post"),
                         ("/v1/embeddings", "post"), ("/v1/models/{model_id}", "get")):
        error = schema["paths"][path][method]["responses"]["400"]["content"]["application/json"]
        assert error["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}, path
    # What the schema documents is what errors.py sends.
    assert set(schema["components"]["schemas"]["ErrorInfo"]["properties"]) == set(
        OpenAIError("x").body()["error"])


@pytest.mark.parametrize("body", [
    [b'{"model": "llm", "prompt": "', b"x" * 200, b'"}'],  # over the limit in its 2nd chunk
    [b"x" * 101],  # over the limit in its 1st
])
def test_a_chunked_body_over_the_limit_is_413_too(make_client, triton, body):
    """Without a Content-Length the body is counted as it comes: still a 413, not 400."""
    c = make_client(FrontendConfig(triton_metrics_url=None, max_request_bytes=100))
    r = c.post("/v1/completions", content=iter(body),
               headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    err = _error_shape(r, 413)
    assert err["code"] == "request_too_large" and triton.requests == []


def test_a_chunked_body_under_the_limit_is_served(make_client, triton):
    c = make_client(FrontendConfig(triton_metrics_url=None, max_request_bytes=100))
    r = c.post("/v1/completions", content=iter([b'{"model": "llm", ', b'"prompt": "a"}']),
               headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 200, r.text
    assert len(triton.requests) == 1


def test_an_unexpected_failure_tells_its_kind_and_id_not_its_text(client, triton, caplog):
    """The exception's text (a path here) stays in the server's log, under the id the
    answer gives."""
    triton.fail = FileNotFoundError(2, "No such file", "/srv/secret/model/tokenizer.json")
    r = client.post("/v1/completions", headers={"X-Request-Id": "boom-1"},
                    json={"model": "llm", "prompt": "a", "max_tokens": 1})
    err = _error_shape(r, 500)
    assert (err["type"], err["code"]) == ("server_error", "internal_error")
    assert "/srv/secret" not in r.text and "FileNotFoundError" not in r.text
    assert r.headers["x-request-id"] == "boom-1"
    internal = err["message"].split("request ")[-1].rstrip(".")
    logged = [rec for rec in caplog.records if rec.name == "triton_openai"
              and internal in rec.getMessage() and "boom-1" in rec.getMessage()]
    assert logged and "/srv/secret" in logged[0].exc_text


class _FailsMidStream(FakeTriton):
    async def stream_infer(self, model, inputs, outputs, request_id):
        async for response in super().stream_infer(model, inputs, outputs, request_id):
            yield response
            raise RuntimeError("cannot open /srv/secret/x")


def test_an_unexpected_failure_inside_a_stream_is_no_leak_either(make_client):
    c = make_client(fake=_FailsMidStream())
    r = c.post("/v1/chat/completions", json={
        "model": "llm", "messages": [{"role": "user", "content": "a"}], "stream": True})
    assert r.status_code == 200 and '"internal_error"' in r.text
    assert "/srv/secret" not in r.text and "RuntimeError" not in r.text


@pytest.mark.parametrize("inputs, status", [(["a"] * 3, 200), (["a"] * 4, 400),
                                            ([[1, 2]] * 4, 400)])
def test_embeddings_inputs_are_bounded(make_client, triton, inputs, status):
    c = make_client(FrontendConfig(triton_metrics_url=None, max_batch_inputs=3))
    r = c.post("/v1/embeddings", json={"model": "embed", "input": inputs})
    assert r.status_code == status, r.text
    if status == 400:
        err = _error_shape(r, 400, param="input")
        assert err["message"] == "input has 4 items; the server takes at most 3 per request."
        assert triton.requests == []


def test_the_key_is_checked_before_the_body_is_read(make_client):
    c = make_client(FrontendConfig(triton_metrics_url=None, api_key="sekret",
                                   max_request_bytes=100))
    for content in (b"x" * 200, iter([b"x" * 200])):
        _error_shape(c.post("/v1/completions", content=content), 401)

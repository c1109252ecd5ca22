"""X-Request-Id: echoed, logged, and the Triton request id of the request's Triton requests."""

import logging

MSG = [{"role": "user", "content": "hi"}]


def test_the_clients_id_is_echoed_and_names_every_triton_request(client, triton, caplog):
    caplog.set_level(logging.INFO, logger="triton_openai.access")
    r = client.post("/v1/completions", headers={"X-Request-Id": "trace-42"},
                    json={"model": "llm", "prompt": ["a b", "c"], "max_tokens": 2})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "trace-42"
    assert r.json()["id"] == "cmpl-trace-42"
    assert [q["request_id"] for q in triton.requests] == ["trace-42", "trace-42"]
    assert "trace-42" in caplog.text


def test_an_id_is_made_when_the_client_sends_none(client, triton):
    first = client.post("/v1/chat/completions", json={"model": "llm", "messages": MSG,
                                                      "max_tokens": 1, "stream": True})
    second = client.post("/v1/embeddings", json={"model": "embed", "input": "x"})
    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
    assert [q["request_id"] for q in triton.requests] == ids
    assert f'"id":"chatcmpl-{ids[0]}"' in first.text.replace(" ", "")


def test_errors_carry_the_id_too(client):
    r = client.post("/v1/chat/completions", headers={"X-Request-Id": "e1"},
                    json={"model": "nope", "messages": MSG})
    assert r.status_code == 404 and r.headers["x-request-id"] == "e1"


def test_an_id_that_cannot_go_into_a_log_line_is_400(client, triton):
    r = client.post("/v1/completions", headers={"X-Request-Id": "a b"},
                    json={"model": "llm", "prompt": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "X-Request-Id"
    assert triton.requests == []
    r = client.get("/v1/models", headers={"X-Request-Id": "x" * 129})
    assert r.status_code == 400

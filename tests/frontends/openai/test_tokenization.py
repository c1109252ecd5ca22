"""/tokenize and /detokenize in vLLM's shapes, with the model's tokenizer and template."""

import pytest
from openai_fakes import FakeTriton

from triton_openai.triton.client import ModelInfo

MSG = [{"role": "user", "content": "hello there"}]


def test_tokenize_a_prompt(client):
    r = client.post("/tokenize", json={"model": "llm", "prompt": "ab cde",
                                       "return_token_strs": True})
    assert r.status_code == 200, r.text
    assert r.json() == {"count": 2, "max_model_len": 64, "tokens": [2, 3],
                        "token_strs": ["xx", "xxx"]}


def test_tokenize_messages_counts_what_a_chat_request_sends(client, triton):
    tokens = client.post("/tokenize", json={"model": "llm", "messages": MSG}).json()["tokens"]
    client.post("/v1/chat/completions", json={"model": "llm", "messages": MSG, "max_tokens": 1})
    assert tokens == triton.requests[-1]["input_ids"]


def test_detokenize(client):
    assert client.post("/detokenize", json={"model": "llm", "tokens": [1, 2]}).json() == {
        "prompt": "x xx"}


@pytest.mark.parametrize("path,body,param", [
    ("/tokenize", {"model": "llm"}, None),
    ("/tokenize", {"model": "llm", "prompt": "a", "messages": MSG}, None),
    ("/detokenize", {"model": "llm", "tokens": [100]}, "tokens"),
    ("/tokenize", {"prompt": "a"}, "model"),  # several models served: which one?
])
def test_bad_requests_are_400(client, path, body, param):
    r = client.post(path, json=body)
    assert r.status_code == 400, r.text
    if param:
        assert r.json()["error"]["param"] == param


def test_the_model_may_be_left_out_when_one_is_served(make_client):
    c = make_client(fake=FakeTriton(models=[ModelInfo("llm", "1", True, {
        "vllm_model": "/x", "vllm_runner": "generate"})]))
    assert c.post("/tokenize", json={"prompt": "a b"}).json()["count"] == 2

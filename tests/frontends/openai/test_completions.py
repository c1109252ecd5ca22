"""/v1/completions against a fake Triton following the vLLM backend's contract."""

import json

import pytest
from openai_fakes import FakeTokenizers, ThreadRecordingTokenizer, event_loop_thread

from qa.common.sse import json_until_done
from triton_openai import FrontendConfig


def _sse(resp):
    return json_until_done(resp.text)


def test_default_max_tokens_is_what_the_context_leaves(client, triton):
    r = client.post("/v1/completions", json={"model": "llm", "prompt": "a b c"}).json()
    sp = json.loads(triton.requests[-1]["sampling_parameters"][0])
    assert sp["max_tokens"] == 64 - 3  # 3 prompt tokens for the fake tokenizer
    assert r["choices"][0]["finish_reason"] == "length"
    assert r["usage"] == {"prompt_tokens": 3, "completion_tokens": 61, "total_tokens": 64}
    # Token ids go to the backend, so that usage is exact.
    assert triton.requests[-1]["input_ids"] == [1, 1, 1]


def test_stream_equals_full(client):
    body = {"model": "llm", "prompt": "a b", "max_tokens": 5, "temperature": 0}
    full = client.post("/v1/completions", json=body).json()
    events = _sse(client.post("/v1/completions", json=dict(body, stream=True,
                                                           stream_options={"include_usage": True})))
    text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
    assert text == full["choices"][0]["text"] == " w0 w1 w2 w3 w4"
    assert events[-1]["usage"] == full["usage"]
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "length"


def test_n_and_list_prompts_index_choices(client):
    r = client.post("/v1/completions", json={
        "model": "llm", "prompt": ["a", "b c"], "n": 2, "max_tokens": 2}).json()
    assert [c["index"] for c in r["choices"]] == [0, 1, 2, 3]
    assert r["usage"]["prompt_tokens"] == 3 and r["usage"]["completion_tokens"] == 8


def test_sampling_parameters_reach_the_backend(client, triton):
    client.post("/v1/completions", json={
        "model": "llm", "prompt": "a", "max_tokens": 3, "temperature": 0.5, "top_p": 0.9,
        "seed": 7, "stop": "x", "presence_penalty": 0.1, "frequency_penalty": 0.2, "n": 1,
        "logprobs": 2})
    sp = json.loads(triton.requests[-1]["sampling_parameters"][0])
    assert sp == {"n": 1, "temperature": 0.5, "top_p": 0.9, "seed": 7, "presence_penalty": 0.1,
                  "frequency_penalty": 0.2, "stop": ["x"], "max_tokens": 3, "logprobs": 2}


def test_a_stream_interval_reaches_the_backend_and_a_bad_one_is_a_400(client, triton):
    client.post("/v1/completions", json={"model": "llm", "prompt": "a", "max_tokens": 3,
                                         "stream": True, "stream_interval": 4})
    assert json.loads(triton.requests[-1]["sampling_parameters"][0])["stream_interval"] == 4
    bad = client.post("/v1/completions", json={"model": "llm", "prompt": "a",
                                               "stream": True, "stream_interval": 0})
    assert bad.status_code == 400 and "stream_interval" in bad.text


def test_logprobs_layout(client):
    r = client.post("/v1/completions", json={
        "model": "llm", "prompt": "a", "max_tokens": 2, "logprobs": 1}).json()
    lp = r["choices"][0]["logprobs"]
    assert lp["tokens"] == [" w0", " w1"]
    assert lp["token_logprobs"] == [-0.5, -0.5]
    assert lp["text_offset"] == [0, 3]
    assert lp["top_logprobs"][0] == {" w0": -0.5}


def test_echo(client):
    r = client.post("/v1/completions", json={
        "model": "llm", "prompt": "a b", "max_tokens": 1, "echo": True}).json()
    assert r["choices"][0]["text"] == "a b w0"


def test_disconnect_cancels_triton_request(triton):
    """Closing the body iterator (what Starlette does on a disconnect) ends the Triton stream."""
    import asyncio

    from openai_fakes import FakeTokenizers

    from triton_openai import FrontendConfig, build_app
    from triton_openai.completions.protocol import CompletionRequest

    triton.delay = 0.01
    app = build_app(FrontendConfig(triton_metrics_url=None), client=triton)
    app.state.completions.gen.tokenizers = FakeTokenizers()

    async def run():
        resp = await app.state.completions.create(
            CompletionRequest(model="llm", prompt="a", max_tokens=50, stream=True))
        it = resp.body_iterator
        await it.__anext__()
        await it.aclose()

    asyncio.run(run())
    assert triton.cancelled == 1


def test_disconnect_cancels_non_streamed_request(triton):
    """A client that leaves before a non-streamed answer is ready cancels its Triton request."""
    import asyncio

    import pytest
    from openai_fakes import FakeTokenizers

    from triton_openai import FrontendConfig, build_app
    from triton_openai.completions.protocol import CompletionRequest
    from triton_openai.completions.router import create_completion
    from triton_openai.web.errors import ClientGone

    class LeavingClient:
        """The route's request: its client leaves 50 ms in."""
        app = None

        async def receive(self):
            await asyncio.sleep(0.05)
            return {"type": "http.disconnect"}

    triton.delay = 0.01
    app = build_app(FrontendConfig(triton_metrics_url=None), client=triton)
    app.state.completions.gen.tokenizers = FakeTokenizers()
    LeavingClient.app = app

    async def run():
        req = CompletionRequest(model="llm", prompt="a", max_tokens=50, stream=False)
        # Streamed from Triton, but answered only at the end: what a long generation does.
        serving = app.state.completions
        original = serving.gen.run

        def streaming_run(model, prompts, samplings, stream, logprobs):
            return original(model, prompts, samplings, True, logprobs)

        serving.gen.run = streaming_run
        with pytest.raises(ClientGone):
            await create_completion(body=req, raw=LeavingClient())

    asyncio.run(run())
    assert triton.cancelled == 1


@pytest.mark.parametrize("prompt, n, status", [
    (["a"] * 4, 1, 200),
    (["a"] * 2, 2, 200),
    (["a"] * 5, 1, 400),
    (["a"] * 3, 2, 400),  # prompts x n: 6 Triton choices
    ([[1, 2]] * 5, 1, 400),  # token-id prompts count alike
])
def test_prompts_times_n_are_bounded_before_any_tokenizing(make_client, triton, prompt, n,
                                                          status):
    c = make_client(FrontendConfig(triton_metrics_url=None, max_batch_inputs=4))
    tok = ThreadRecordingTokenizer()
    c.app.state.completions.gen.tokenizers = FakeTokenizers(tok)
    r = c.post("/v1/completions", json={"model": "llm", "prompt": prompt, "n": n,
                                        "max_tokens": 1})
    assert r.status_code == status, r.text
    if status == 400:
        err = r.json()["error"]
        assert err["param"] == "prompt" and err["type"] == "invalid_request_error"
        assert err["message"] == (
            f"This request asks for {len(prompt) * n} completions ({len(prompt)} prompts "
            f"x n={n}); the server takes at most 4 per request.")
        assert tok.tokenized == 0 and triton.requests == []


def test_the_default_bound_is_openais_2048(client, triton):
    r = client.post("/v1/completions", json={"model": "llm", "prompt": ["a"] * 2049})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    assert triton.requests == []


def test_a_big_batch_is_tokenized_in_one_thread_off_the_event_loop(make_client):
    c = make_client()
    tok = ThreadRecordingTokenizer()
    c.app.state.completions.gen.tokenizers = FakeTokenizers(tok)
    loop_thread = event_loop_thread(c)
    small = c.post("/v1/completions", json={"model": "llm", "prompt": ["a b"] * 4,
                                            "max_tokens": 1})
    assert small.status_code == 200 and set(tok.threads) == {loop_thread}
    tok.threads.clear()
    big = c.post("/v1/completions", json={"model": "llm", "prompt": ["ab" * 100] * 64,
                                          "max_tokens": 1})
    assert big.status_code == 200 and len(tok.threads) == 64
    assert len(set(tok.threads)) == 1 and tok.threads[0] != loop_thread

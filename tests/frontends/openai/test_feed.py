"""Streams on a model's feed (triton/feed.py): the backend encodes the events, the frontend
writes them as they come; what a client reads is what it reads without the feed."""

import asyncio
import json

import pytest
from openai_fakes import FakeTriton, FeedingTriton

from qa.common.sse import json_until_done
from triton_openai import FrontendConfig
from triton_openai.triton import feed as frontend_feed
from triton_openai.triton.client import TritonError

MSG = [{"role": "user", "content": "hello there"}]
CHAT = {"model": "llm", "messages": MSG, "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}}
COMPLETION = {"model": "llm", "prompt": "say something", "max_tokens": 4, "stream": True,
              "stream_options": {"include_usage": True}}


def _async_client(client):
    """An httpx client of the test client's app, for requests sent at once."""
    import httpx

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app), base_url="http://t")


def _events(resp) -> list[dict]:
    """The stream's events without what differs from request to request."""
    assert resp.status_code == 200, resp.text
    assert resp.text.endswith("data: [DONE]\n\n")
    events = json_until_done(resp.text)
    for e in events:
        e.pop("id"), e.pop("created")
    return events


@pytest.mark.parametrize("path,body", [("/v1/chat/completions", CHAT),
                                       ("/v1/completions", COMPLETION)], ids=["chat", "completions"])
def test_a_stream_on_the_feed_reads_as_one_without_it(make_client, path, body):
    fed = FeedingTriton()
    on_feed = _events(make_client(fake=fed).post(path, json=body))
    without = _events(make_client(fake=FakeTriton()).post(path, json=body))
    assert fed.opens == 1 and fed.fed_streams == 1
    assert on_feed == without
    assert on_feed[-1]["usage"]["completion_tokens"] == body["max_tokens"]
    # The stream's own request asked the backend to send its text on the feed.
    feed_id = fed.parameters[0]["vllm_feed_open"]
    assert fed.parameters[1]["vllm_feed"] == feed_id


def test_streams_the_feed_cannot_carry_go_on_their_own_requests(make_client):
    fed = FeedingTriton()
    client = make_client(fake=fed)
    for body in (dict(CHAT, n=2), dict(CHAT, logprobs=True),
                 dict(CHAT, stream_options={"include_usage": True,
                                            "continuous_usage_stats": True}),
                 dict(COMPLETION, echo=True), dict(COMPLETION, prompt=["a", "b"])):
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        assert client.post(path, json=body).status_code == 200
    assert fed.fed_streams == 0


def test_one_feed_carries_many_streams_each_to_its_own_client(make_client):
    fed = FeedingTriton(delay=0.001)
    client = make_client(fake=fed)

    async def main():
        async with _async_client(client) as http:
            return await asyncio.gather(*(
                http.post("/v1/completions", json=dict(COMPLETION, max_tokens=k))
                for k in range(1, 9)))

    answers = asyncio.run(main())
    assert fed.opens == 1 and fed.fed_streams == 8
    for k, resp in enumerate(answers, start=1):
        events = _events(resp)
        text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
        assert text == "".join(f" w{i}" for i in range(k))
        assert events[-1]["usage"]["completion_tokens"] == k


def test_a_model_without_feeds_streams_on_its_own_requests_and_is_not_asked_again(make_client):
    fed = FeedingTriton(refuse_feeds=TritonError("[invalid_argument] no feeds here", 400))
    client = make_client(fake=fed)
    first = _events(client.post("/v1/chat/completions", json=CHAT))
    second = _events(client.post("/v1/chat/completions", json=CHAT))
    assert first == second
    assert fed.opens == 1 and fed.fed_streams == 0


def test_an_instance_without_the_feed_answers_on_the_request_itself(make_client):
    fed = FeedingTriton(own_answers=True)
    on_own = _events(make_client(fake=fed).post("/v1/chat/completions", json=CHAT))
    without = _events(make_client(fake=FakeTriton()).post("/v1/chat/completions", json=CHAT))
    assert on_own == without


def test_a_stream_whose_end_never_comes_ends_with_an_error(make_client, monkeypatch):
    monkeypatch.setattr(frontend_feed, "END_GRACE_S", 0.2)
    fed = FeedingTriton(drop_end=True)
    resp = make_client(fake=fed).post("/v1/completions", json=COMPLETION)
    events = json_until_done(resp.text)
    assert "never came on the feed" in events[-1]["error"]["message"]
    # The text that came is all there, before the error.
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == " w0 w1 w2 w3"


def test_a_feed_that_ends_fails_its_streams_and_the_next_stream_opens_another(make_client):
    fed = FeedingTriton(delay=0.05)
    client = make_client(fake=fed)

    async def main():
        async with _async_client(client) as http:
            pending = asyncio.ensure_future(
                http.post("/v1/completions", json=dict(COMPLETION, max_tokens=50)))
            while not fed.feeds or fed.fed_streams == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            fed.end_feeds(TritonError("[unavailable] the model is unloading", 503))
            cut = await pending
            again = await http.post("/v1/completions", json=COMPLETION)
            return cut, again

    cut, again = asyncio.run(main())
    events = json_until_done(cut.text)
    assert "the model is unloading" in events[-1]["error"]["message"]
    assert _events(again)[-1]["usage"]["completion_tokens"] == 4
    assert fed.opens == 2


def test_a_feed_the_backend_closed_while_idle_is_opened_again(make_client):
    fed = FeedingTriton()
    client = make_client(fake=fed)
    first = _events(client.post("/v1/completions", json=COMPLETION))
    fed.end_feeds()  # it carried no stream for a while

    async def settle():
        await asyncio.sleep(0.05)
    client.portal.call(settle)  # the frontend reads the feed's end
    second = _events(client.post("/v1/completions", json=COMPLETION))
    assert first == second
    assert fed.opens == 2 and fed.fed_streams == 2


def test_no_stream_feeds_turns_the_feed_off(make_client):
    fed = FeedingTriton()
    config = FrontendConfig(triton_metrics_url=None, stream_feeds=False)
    _events(make_client(config, fake=fed).post("/v1/chat/completions", json=CHAT))
    assert fed.opens == 0 and fed.fed_streams == 0


def test_the_template_cuts_an_event_where_its_text_and_finish_go():
    from triton_openai.web import sse

    body = {"id": "x", "choices": [{"index": 0, "text": "", "finish_reason": None}]}
    before, middle, after = sse.template(body, ("choices", 0, "text"),
                                         ("choices", 0, "finish_reason"))
    assert before == 'data: {"id":"x","choices":[{"index":0,"text":'
    assert middle == ',"finish_reason":'
    assert after == "}]}\n\n"
    event = (before + json.dumps("hi") + middle + "null" + after).encode()
    assert event == sse.event({"id": "x", "choices": [{"index": 0, "text": "hi",
                                                       "finish_reason": None}]})


def test_events_that_waited_go_out_in_one_write_and_the_end_after_them():
    inbox = frontend_feed._Inbox()
    for text in ("a", "b", "c"):
        inbox.put(b"d" + f"data: {text}\n\n".encode())
    inbox.put(b'e{"finish_reason": "stop", "num_input_tokens": 2, "num_output_tokens": 3}')
    inbox.put(frontend_feed._FINAL)

    async def read():
        return [item async for item in frontend_feed._read(inbox)]

    assert asyncio.run(read()) == [b"data: a\n\ndata: b\n\ndata: c\n\n",
                                   frontend_feed.FeedEnd("stop", 2, 3)]


def test_an_error_of_the_request_ends_the_stream_after_what_came():
    inbox = frontend_feed._Inbox()
    inbox.put(b"ddata: a\n\n")
    inbox.put(TritonError("[invalid_argument] no", 400))

    async def read():
        got = []
        with pytest.raises(TritonError):
            async for item in frontend_feed._read(inbox):
                got.append(item)
        return got

    assert asyncio.run(read()) == [b"data: a\n\n"]

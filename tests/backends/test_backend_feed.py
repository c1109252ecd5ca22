"""feed.py: what opens a feed, what sends a stream on one, and one response per step."""

import json

import pytest
from triton_vllm_backend.stub import feed, wire

FEED_ID = "0123456789abcdef" * 2
TEMPLATE = json.dumps(['data: {"text":', ',"finish_reason":', "}\n\n"])


def on_feed(**overrides):
    parameters = {wire.FEED_PARAMETER: FEED_ID, wire.FEED_KEY_PARAMETER: "3",
                  wire.FEED_EVENT_PARAMETER: TEMPLATE}
    parameters.update(overrides)
    return {k: v for k, v in parameters.items() if v is not None}


def test_a_request_without_feed_parameters_opens_and_names_none():
    assert feed.open_request({}) is None
    assert feed.delivery_of(json.dumps({"temperature": 0})) is None


@pytest.mark.parametrize("feed_id", ["", "short", "G" * 32, FEED_ID.upper(), 7, FEED_ID + "0"])
def test_a_feed_id_is_32_lowercase_hex_digits(feed_id):
    with pytest.raises(feed.FeedError, match="32 lowercase hex digits"):
        feed.open_request({wire.FEED_OPEN_PARAMETER: feed_id})
    with pytest.raises(feed.FeedError, match="32 lowercase hex digits"):
        feed.delivery_of(on_feed(**{wire.FEED_PARAMETER: feed_id}))


@pytest.mark.parametrize("key", [None, "", "k" * 65, 5])
def test_a_stream_names_its_key(key):
    with pytest.raises(feed.FeedError, match=wire.FEED_KEY_PARAMETER):
        feed.delivery_of(on_feed(**{wire.FEED_KEY_PARAMETER: key}))


@pytest.mark.parametrize("event", [None, "not json", json.dumps(["a", "b"]),
                                   json.dumps(["a", "b", 3]), json.dumps(["x" * 5000, "", ""])])
def test_a_streams_event_template_is_three_strings_of_bounded_size(event):
    with pytest.raises(feed.FeedError, match=wire.FEED_EVENT_PARAMETER):
        feed.delivery_of(on_feed(**{wire.FEED_EVENT_PARAMETER: event}))


def test_an_event_is_its_template_around_the_text_and_finish_as_json():
    delivery = feed.delivery_of(json.dumps(on_feed()))
    assert (delivery.feed_id, delivery.key) == (FEED_ID, b"3")
    assert delivery.template.event('a "b"', None) == b'data: {"text":"a \\"b\\"","finish_reason":null}\n\n'
    assert delivery.template.event("", "stop") == b'data: {"text":"","finish_reason":"stop"}\n\n'
    # Line breaks that JSON keeps raw are escaped, as the frontend's own events have them.
    assert b"\\u2028" in delivery.template.event("a\u2028b", None)


def test_one_response_carries_every_record_of_a_step():
    sent, scheduled = [], []
    opened = feed.Feed(None, sent.append, scheduled.append)
    opened.put(b"1", b"dA")
    opened.put(b"2", b"dB")
    assert len(scheduled) == 1 and sent == []  # one flush for the step, after the others
    scheduled.pop()()
    assert sent == [[b"1", b"dA", b"2", b"dB"]]
    opened.flush()  # nothing waiting: nothing sent
    assert len(sent) == 1
    opened.put(b"1", feed.end_record("stop", 4, 2))
    assert len(scheduled) == 1


def test_feeds_are_bounded_and_an_open_one_cannot_be_taken_over():
    feeds = feed.Feeds(max_feeds=2)
    feeds.open("a" * 32, feed.Feed(None, print, print))
    with pytest.raises(feed.FeedError, match="open already"):
        feeds.open("a" * 32, feed.Feed(None, print, print))
    feeds.open("b" * 32, feed.Feed(None, print, print))
    with pytest.raises(feed.FeedError, match="2 feeds open"):
        feeds.open("c" * 32, feed.Feed(None, print, print))
    assert feeds.close("a" * 32) is not None and feeds.get("a" * 32) is None
    feeds.open("c" * 32, feed.Feed(None, print, print))


def test_the_feeds_parameters_are_not_sampling_parameters():
    assert feed.sampling_of(on_feed()) is None
    assert json.loads(feed.sampling_of(json.dumps(on_feed(temperature=0)))) == {"temperature": 0}


def test_a_feed_is_idle_once_it_carried_no_stream_for_idle_s():
    opened = feed.Feed(None, print, print, now=10.0)
    assert not opened.idle(10.0 + feed.IDLE_S / 2)
    assert opened.idle(10.0 + feed.IDLE_S)
    opened.streams = 1
    assert not opened.idle(100.0)

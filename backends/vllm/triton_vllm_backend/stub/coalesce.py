"""How many tokens a streamed response carries: one, unless the stub falls behind the
engine, or as many as the model's fixed interval says.

Every streamed response costs the same CPU on each hop past the engine (a pb_utils
response and a shared-memory round trip in the stub, an HTTP/gRPC event in tritonserver)
whatever it carries.  Streams on a feed (feed.py) share those costs per engine step;
those on their own requests (Triton's KServe clients) pay them per response.  When they
cost more than the host has, the stub falls behind the engine, and vLLM merges the
deltas waiting for it: a response then brings more tokens than its stream asked for.
That excess is the lag measured here (LagMeter), not the number of streams: while
responses bring what they asked for, the interval comes back down (a step at most every
quarter second either way), so a host with CPU to spare streams every token as it comes, and one whose engine
is the slower part never coalesces at all.  A stream's interval is vLLM's per-request
`SamplingParams.stream_interval`: vLLM then hands out its first token at once, its last
with the end, and the ones between `interval` at a time.

A token that waits for the others of its response is late by the engine's time per token
for each of them, so the interval is also held to what fits in a delay bound at the pace
the engine has lately produced tokens at (TokenPace): on a machine where a step takes
40 ms, eight tokens a response would hold text back for 280 ms, where at 5 ms they cost 35.

vLLM's own `--stream-interval` (model.json's "stream_interval", `serve --stream-interval N`)
is the least any stream gets, as with `vllm serve`: vLLM takes the larger of it and a
request's.  A request's own `stream_interval` is always kept.

Pure (no Triton, no vLLM): model.py asks it once per streaming request, and tells it of
each streamed response it sends.
"""

from __future__ import annotations

from .engine_config import whole_number_setting

# The config.pbtxt parameter (or environment variable) with the largest interval that
# the lag may bring; 1 turns the coalescing off.
MAX_INTERVAL_SETTING = "STREAM_INTERVAL_MAX"
DEFAULT_MAX_INTERVAL = 16
# The config.pbtxt parameter (or environment variable) with the longest a token may wait
# for the others of its response, in milliseconds.
MAX_DELAY_SETTING = "STREAM_INTERVAL_MAX_DELAY_MS"
DEFAULT_MAX_DELAY_MS = 150
# Extra tokens per response (over what the stream asked for), on average over the recent
# responses, past which new streams get a larger interval, and under which a smaller one.
BEHIND = 0.5
CAUGHT_UP = 0.1
# Seconds between two changes of the interval, up or down.  New streams start many times
# a second under load, and the lag of responses shows what the interval of the streams
# already running did: a change per new stream would run to the largest interval, or back
# to one, before the last change showed.
STEP_S = 0.25


def max_interval(params: dict, env: dict) -> int:
    """The largest interval the config (or the environment) allows; a clear error for a
    value that is not a whole number of at least 1."""
    return whole_number_setting(params, MAX_INTERVAL_SETTING, env, DEFAULT_MAX_INTERVAL,
                                "1 sends every token at once")


def max_delay_s(params: dict, env: dict) -> float:
    """The longest a token may wait for the others of its response, in seconds, from the
    config (or the environment); a clear error for a value that is not a whole number of
    milliseconds of at least 1."""
    return whole_number_setting(params, MAX_DELAY_SETTING, env, DEFAULT_MAX_DELAY_MS,
                                "milliseconds") / 1000


class LagMeter:
    """How far behind the engine the stub's streamed responses are, and the interval that
    new streams get from it."""

    def __init__(self, largest: int, weight: float = 0.05):
        self._largest = largest
        self._weight = weight
        self.extra = 0.0  # extra tokens per response, a moving average
        self.interval = 1  # what the next stream gets, before the delay bound
        self._changed_at = float("-inf")  # when the interval last changed

    def observe(self, tokens: int, asked: int) -> None:
        """A streamed response with `tokens` new tokens, of a stream that asked for
        `asked` a response."""
        if tokens < 1:
            return
        self.extra += self._weight * (max(0, tokens - asked) - self.extra)

    def next_interval(self, now: float, seconds_per_token: float | None = None,
                      max_delay: float | None = None) -> int:
        """The interval of a stream that starts at `now` (seconds): at most every STEP_S,
        larger by the lag while responses bring more than they ask for, a token smaller
        while they do not."""
        if now - self._changed_at >= STEP_S:
            if self.extra > BEHIND:
                self.interval = min(self._largest,
                                    self.interval + max(1, round(self.extra)))
                self._changed_at = now
            elif self.extra < CAUGHT_UP and self.interval > 1:
                self.interval -= 1
                self._changed_at = now
        interval = self.interval
        if seconds_per_token and max_delay is not None:
            # A response's first token waits for the interval's other tokens.
            interval = min(interval, 1 + int(max_delay / seconds_per_token))
        return max(1, interval)


class TokenPace:
    """The engine's recent time per output token of a stream: a moving average over the
    gaps between a stream's responses, each divided by the tokens it brought."""

    def __init__(self, weight: float = 0.05):
        self._weight = weight
        self.seconds_per_token: float | None = None  # None until a gap was seen

    def observe(self, seconds: float, tokens: int) -> None:
        """A streamed response that came `seconds` after the stream's previous one,
        with `tokens` new tokens."""
        if tokens < 1 or seconds <= 0:
            return
        pace = seconds / tokens
        if self.seconds_per_token is None:
            self.seconds_per_token = pace
        else:
            self.seconds_per_token += self._weight * (pace - self.seconds_per_token)

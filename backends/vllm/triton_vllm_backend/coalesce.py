"""How many tokens a streamed response carries, from the load the model instance is under.

Every streamed response costs the same CPU on each hop past the engine (a pb_utils
response and a shared-memory round trip in the stub, an HTTP/gRPC event in tritonserver,
an SSE event in the frontend) whatever it carries.  Under load those hops, not the
engine, cap the tokens per second one instance can stream; so the more streams run at
once, the more tokens each response carries, through vLLM's per-request
`SamplingParams.stream_interval`: vLLM then hands out a stream's first token at once, its
last with the end, and the ones between `interval` at a time.  Alone, or with a few
others, a stream still gets every token as it comes.

The load is the most streams in flight over the last second or two, not the count at
the moment a stream starts: under a closed-loop load (a benchmark's fixed concurrency,
clients that send again as soon as an answer ends) streams start and end in waves, and
the first streams of each wave would otherwise see an idle instance and take every token
alone, though the wave fills up a few milliseconds later.

A token that waits for the others of its response is late by the engine's time per token
for each of them, so the interval is also held to what fits in a delay bound at the pace
the engine has lately produced tokens at: on a machine where a step takes 40 ms, eight
tokens a response would hold text back for 280 ms, where at 5 ms they cost 35.

Pure (no Triton, no vLLM): model.py asks it once per streaming request, and tells the
pace each streamed response it sends.
"""

from __future__ import annotations

from .engine_config import whole_number_setting

# The config.pbtxt parameter (or environment variable) with the largest interval; 1 turns
# the coalescing off.
MAX_INTERVAL_SETTING = "STREAM_INTERVAL_MAX"
DEFAULT_MAX_INTERVAL = 16
# The config.pbtxt parameter (or environment variable) with the longest a token may wait
# for the others of its response, in milliseconds.
MAX_DELAY_SETTING = "STREAM_INTERVAL_MAX_DELAY_MS"
DEFAULT_MAX_DELAY_MS = 150
# Up to this many streams in flight (a stream itself included), every token goes out as
# it comes: an instance this lightly loaded has CPU to spare for each.  Past that, each
# further stream adds a token to each response: 5 streams get two tokens at a time, 8
# five, 16 thirteen, 19 and more sixteen (with the default maximum, and as far as the
# delay bound allows).
# Measured on 2 cores: at 16 streams, in one container, 4 -> 8 tokens a response took
# tritonserver from 91 to 62 us of CPU per token, the frontend from 109 to 78 and the
# stub from 256 to 214; at 64 streams, up to 16 tokens rather than 8 took the serving
# side from 161 to 131 us per token and chat from 0.81x to 1.07x vLLM's tokens/s; at 8
# and 16 streams, a token more per extra stream rather than per two gave 8% and 10% more
# tokens/s, with lower TTFT and TPOT (backends/vllm/README.md, "Where a streamed token's
# CPU goes").
FREE_STREAMS = 4


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


class RecentPeak:
    """The most streams in flight seen over the last `window` to 2 x `window` seconds."""

    def __init__(self, window: float = 1.0):
        self._window = window
        self._since = float("-inf")  # when the current window began
        self._current = 0  # the peak of the current window
        self._previous = 0  # the peak of the window before it

    def observe(self, streams_in_flight: int, now: float) -> int:
        """Note the streams in flight now; the recent peak, this count included."""
        if now - self._since >= self._window:
            # A window with no stream started at all leaves no peak to carry over.
            recent = now - self._since < 2 * self._window
            self._previous = self._current if recent else 0
            self._current, self._since = 0, now
        self._current = max(self._current, streams_in_flight)
        return max(self._current, self._previous)


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


def interval_for(streams_in_flight: int, largest: int, seconds_per_token: float | None = None,
                 max_delay: float | None = None) -> int:
    """Tokens per response for a stream that starts with `streams_in_flight` streams
    running, itself included; at most what keeps the response's first token from waiting
    longer than `max_delay` seconds at `seconds_per_token` (both known)."""
    interval = min(largest, 1 + max(0, streams_in_flight - FREE_STREAMS))
    if seconds_per_token and max_delay is not None:
        # A response's first token waits for the interval's other tokens.
        interval = min(interval, 1 + int(max_delay / seconds_per_token))
    return max(1, interval)

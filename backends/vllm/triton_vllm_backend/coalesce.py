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

Pure (no Triton, no vLLM): model.py asks it once per streaming request.
"""

from __future__ import annotations

from .engine_config import ConfigError, parameter

# The config.pbtxt parameter (or environment variable) with the largest interval; 1 turns
# the coalescing off.
MAX_INTERVAL_SETTING = "STREAM_INTERVAL_MAX"
DEFAULT_MAX_INTERVAL = 8
# Up to this many streams in flight (a stream itself included), every token goes out as
# it comes: an instance this lightly loaded has CPU to spare for each.
FREE_STREAMS = 4
# Past that, each this many more streams add a token to each response: 5-6 streams get
# two tokens at a time, 7-8 three, ..., 17 and more eight (with the default maximum).
# Measured at 16 streams on 2 cores, in one container: 4 -> 8 tokens a response took
# tritonserver from 91 to 62 us of CPU per token, the frontend from 109 to 78 and the
# stub from 256 to 214 (backends/vllm/README.md, "Streaming under load").
STREAMS_PER_EXTRA_TOKEN = 2


def max_interval(params: dict, env: dict) -> int:
    """The largest interval the config (or the environment) allows; a clear error for a
    value that is not a whole number of at least 1."""
    value = parameter(params, MAX_INTERVAL_SETTING)
    if value is None:
        value = env.get(MAX_INTERVAL_SETTING)
    if value is None or str(value).strip() == "":
        return DEFAULT_MAX_INTERVAL
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{MAX_INTERVAL_SETTING} must be a whole number of at least 1 "
                           f"(1 sends every token at once), got {value!r}")
    return number


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


def interval_for(streams_in_flight: int, largest: int) -> int:
    """Tokens per response for a stream that starts with `streams_in_flight` streams
    running, itself included."""
    extra = max(0, streams_in_flight - FREE_STREAMS + 1) // STREAMS_PER_EXTRA_TOKEN
    return max(1, min(largest, 1 + extra))

"""How many tokens a streamed response carries, from the load the model instance is under.

Every streamed response costs the same CPU on each hop past the engine (a pb_utils
response and a shared-memory round trip in the stub, an HTTP/gRPC event in tritonserver,
an SSE event in the frontend) whatever it carries.  Under load those hops, not the
engine, cap the tokens per second one instance can stream; so the more streams run at
once, the more tokens each response carries, through vLLM's per-request
`SamplingParams.stream_interval`: vLLM then hands out a stream's first token at once, its
last with the end, and the ones between `interval` at a time.  Alone, or with a few
others, a stream still gets every token as it comes.

Pure (no Triton, no vLLM): model.py asks it once per streaming request.
"""

from __future__ import annotations

from .engine_config import ConfigError, parameter

# The config.pbtxt parameter (or environment variable) with the largest interval; 1 turns
# the coalescing off.
MAX_INTERVAL_SETTING = "STREAM_INTERVAL_MAX"
DEFAULT_MAX_INTERVAL = 4
# Each this many streams in flight add a token to each response: up to 4 streams get every
# token, 5-8 two at a time, ..., 13 and more four at a time (with the default maximum).
STREAMS_PER_EXTRA_TOKEN = 4


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


def interval_for(streams_in_flight: int, largest: int) -> int:
    """Tokens per response for a stream that starts with `streams_in_flight` streams
    running, itself included."""
    return max(1, min(largest, 1 + (streams_in_flight - 1) // STREAMS_PER_EXTRA_TOKEN))

"""How many tokens a streamed response carries: the lag it is measured from, and its settings."""

from __future__ import annotations

import pytest
from triton_vllm_backend.stub import coalesce
from triton_vllm_backend.stub.engine_config import ConfigError


def test_a_stub_that_keeps_up_streams_every_token_whatever_the_load():
    lag = coalesce.LagMeter(16)
    for i in range(1000):  # responses of any number of streams, each what it asked for
        lag.observe(1, 1)
        assert lag.next_interval(i / 100) == 1


def test_the_interval_grows_with_the_lag_up_to_the_largest():
    lag = coalesce.LagMeter(8, weight=0.5)
    lag.observe(3, 1)  # two tokens more than asked: vLLM merged what waited for the stub
    lag.observe(3, 1)
    assert lag.extra == pytest.approx(1.5)
    assert lag.next_interval(0.0) == 3
    # Streams that start before the change showed in the lag get the same interval.
    assert lag.next_interval(0.1) == 3
    assert lag.next_interval(0.25) == 5
    for t in range(2, 6):
        lag.next_interval(t * 0.25)
    assert lag.next_interval(2.0) == 8


def test_once_the_stub_catches_up_the_interval_comes_back_down_a_step_a_quarter_second():
    lag = coalesce.LagMeter(8, weight=0.5)
    lag.interval = 6
    for _ in range(10):
        lag.observe(6, 6)  # each response what it asked for: no lag
    # Streams start many times a second: one step down for all that start in a quarter.
    assert [lag.next_interval(t) for t in (0.0, 0.1, 0.2)] == [5, 5, 5]
    assert [lag.next_interval(t) for t in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)] == [4, 3, 2, 1,
                                                                                 1, 1]
    # Behind again: up by the lag at the next step.
    for _ in range(10):
        lag.observe(4, 1)
    assert lag.next_interval(1.6) == 4


@pytest.mark.parametrize(("seconds_per_token", "max_delay", "expected"), [
    (None, 0.150, 16),  # no pace seen yet: the lag alone
    (0.005, None, 16),  # no bound
    (0.005, 0.150, 16),  # 31 tokens would fit
    (0.010, 0.150, 16),  # 15 more tokens fit in 150 ms
    (0.020, 0.150, 8),
    (0.040, 0.150, 4),  # a slow engine: 3 more tokens, 120 ms
    (0.200, 0.150, 1),  # slower than the bound: every token as it comes
])
def test_a_response_waits_no_longer_than_the_delay_bound(seconds_per_token, max_delay, expected):
    lag = coalesce.LagMeter(16)
    lag.interval, lag.extra = 16, 1.0  # far behind
    assert lag.next_interval(0.0, seconds_per_token, max_delay) == expected


def test_the_pace_is_a_moving_average_of_the_gaps_per_token():
    pace = coalesce.TokenPace(weight=0.5)
    assert pace.seconds_per_token is None
    pace.observe(0.080, 8)  # 8 tokens in 80 ms
    assert pace.seconds_per_token == pytest.approx(0.010)
    pace.observe(0.030, 1)
    assert pace.seconds_per_token == pytest.approx(0.020)
    # A response with no new token, or no time between, says nothing of the pace.
    pace.observe(0.5, 0)
    pace.observe(0.0, 3)
    assert pace.seconds_per_token == pytest.approx(0.020)


def test_the_delay_bound_defaults_to_150_ms_and_the_parameter_wins():
    assert coalesce.max_delay_s({}, {}) == pytest.approx(0.150)
    assert coalesce.max_delay_s({}, {"STREAM_INTERVAL_MAX_DELAY_MS": "40"}) == pytest.approx(0.040)
    assert coalesce.max_delay_s({"STREAM_INTERVAL_MAX_DELAY_MS": {"string_value": "500"}},
                                {"STREAM_INTERVAL_MAX_DELAY_MS": "40"}) == pytest.approx(0.5)


def test_the_parameter_wins_over_the_environment_and_defaults_to_sixteen():
    assert coalesce.max_interval({}, {}) == 16
    assert coalesce.max_interval({}, {"STREAM_INTERVAL_MAX": "2"}) == 2
    assert coalesce.max_interval({"STREAM_INTERVAL_MAX": {"string_value": "1"}},
                                 {"STREAM_INTERVAL_MAX": "8"}) == 1


@pytest.mark.parametrize("value", ["0", "-2", "four", "1.5"])
@pytest.mark.parametrize(("setting", "read", "hint"), [
    ("STREAM_INTERVAL_MAX", coalesce.max_interval, "1 sends every token at once"),
    ("STREAM_INTERVAL_MAX_DELAY_MS", coalesce.max_delay_s, "milliseconds")])
def test_a_bad_setting_is_a_config_error(setting, read, hint, value):
    message = f"{setting} must be a whole number of at least 1 ({hint}), got '{value}'"
    with pytest.raises(ConfigError) as raised:
        read({setting: {"string_value": value}}, {})
    assert str(raised.value) == message

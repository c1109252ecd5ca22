"""How many tokens a streamed response carries under load, and its setting."""

from __future__ import annotations

import pytest
from triton_vllm_backend import coalesce
from triton_vllm_backend.engine_config import ConfigError


@pytest.mark.parametrize(("streams", "largest", "expected"), [
    (1, 8, 1), (4, 8, 1), (5, 8, 2), (6, 8, 3), (8, 8, 5), (11, 8, 8), (16, 8, 8),
    (64, 8, 8), (64, 4, 4), (64, 1, 1), (0, 8, 1)])
def test_the_interval_grows_with_the_streams_in_flight(streams, largest, expected):
    assert coalesce.interval_for(streams, largest) == expected


@pytest.mark.parametrize(("streams", "expected"), [(8, 5), (16, 13), (18, 15), (19, 16), (64, 16)])
def test_the_default_maximum_is_reached_from_19_streams(streams, expected):
    assert coalesce.interval_for(streams, coalesce.max_interval({}, {})) == expected


@pytest.mark.parametrize(("seconds_per_token", "max_delay", "expected"), [
    (None, 0.150, 16),  # no pace seen yet: the load alone
    (0.005, None, 16),  # no bound
    (0.005, 0.150, 16),  # 31 tokens would fit: the load's 16
    (0.010, 0.150, 16),  # 15 more tokens fit in 150 ms
    (0.020, 0.150, 8),
    (0.040, 0.150, 4),  # a slow engine: 3 more tokens, 120 ms
    (0.200, 0.150, 1),  # slower than the bound: every token as it comes
])
def test_a_response_waits_no_longer_than_the_delay_bound(seconds_per_token, max_delay, expected):
    assert coalesce.interval_for(64, 16, seconds_per_token, max_delay) == expected


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


def test_the_load_is_the_recent_peak_so_a_wave_s_first_streams_share_in_it():
    peak = coalesce.RecentPeak(window=1.0)
    # A wave of 16 streams starts, one after the other.
    assert [peak.observe(n, 0.0 + n / 1000) for n in range(1, 17)] == list(range(1, 17))
    # It ends; the next wave's first streams start with few others in flight.
    assert peak.observe(1, 0.9) == 16
    assert peak.observe(2, 1.2) == 16  # a new window: the last one's peak still counts
    assert peak.observe(1, 1.9) == 16
    # Two windows later, the old peak is gone.
    assert peak.observe(1, 2.3) == 2
    assert peak.observe(1, 3.4) == 1


def test_after_a_quiet_spell_a_lone_stream_gets_every_token():
    peak = coalesce.RecentPeak(window=1.0)
    assert peak.observe(16, 0.0) == 16
    # Nothing started for more than two windows: the peak does not carry over.
    assert peak.observe(1, 2.5) == 1
    assert coalesce.interval_for(peak.observe(1, 2.6), 8) == 1

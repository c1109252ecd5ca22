"""How many tokens a streamed response carries under load, and its setting."""

from __future__ import annotations

import pytest
from triton_vllm_backend import coalesce
from triton_vllm_backend.engine_config import ConfigError


@pytest.mark.parametrize(("streams", "largest", "expected"), [
    (1, 4, 1), (4, 4, 1), (5, 4, 2), (8, 4, 2), (9, 4, 3), (13, 4, 4), (64, 4, 4),
    (64, 1, 1), (64, 8, 8), (0, 4, 1)])
def test_the_interval_grows_with_the_streams_in_flight(streams, largest, expected):
    assert coalesce.interval_for(streams, largest) == expected


def test_the_parameter_wins_over_the_environment_and_defaults_to_four():
    assert coalesce.max_interval({}, {}) == 4
    assert coalesce.max_interval({}, {"STREAM_INTERVAL_MAX": "2"}) == 2
    assert coalesce.max_interval({"STREAM_INTERVAL_MAX": {"string_value": "1"}},
                                 {"STREAM_INTERVAL_MAX": "8"}) == 1


@pytest.mark.parametrize("value", ["0", "-2", "four", "1.5"])
def test_a_bad_maximum_is_a_config_error(value):
    with pytest.raises(ConfigError, match=r"^STREAM_INTERVAL_MAX must be a whole number of at "
                                          rf"least 1 \(1 sends every token at once\), got '{value}'$"):
        coalesce.max_interval({"STREAM_INTERVAL_MAX": {"string_value": value}}, {})

"""Abort requests: which request they name, and the ids remembered for late arrivals."""

import json

import pytest
from triton_vllm_backend.stub.abort import AbortError, RecentAborts, target_of
from triton_vllm_backend.stub.wire import ABORT_PARAMETER


def test_target_of_reads_the_request_parameters():
    assert target_of(None) is None
    assert target_of("") is None
    assert target_of('{"max_tokens": 3}') is None  # an ordinary request
    assert target_of(f'{{"{ABORT_PARAMETER}": "cmpl-1"}}') == "cmpl-1"
    assert target_of({ABORT_PARAMETER: "cmpl-2"}) == "cmpl-2"
    for bad in (json.dumps({ABORT_PARAMETER: ""}), json.dumps({ABORT_PARAMETER: 5})):
        with pytest.raises(AbortError, match=ABORT_PARAMETER):
            target_of(bad)


def test_recent_aborts_forget_old_and_excess_ids():
    now = [0.0]
    recent = RecentAborts(remember_s=10, remember_max=2, clock=lambda: now[0])
    recent.add("a")
    assert "a" in recent and "b" not in recent
    now[0] = 5
    recent.add("b")
    now[0] = 11  # "a" is 11 s old, "b" 6 s
    assert "a" not in recent and "b" in recent
    recent.add("c")
    recent.add("d")  # more than remember_max: the oldest goes
    assert "b" not in recent and "c" in recent and "d" in recent


def test_an_early_abort_is_used_up_by_its_request():
    recent = RecentAborts()
    recent.add("a")
    assert recent.take("a")
    assert not recent.take("a") and "a" not in recent
    assert not recent.take("never-aborted")

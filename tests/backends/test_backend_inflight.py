"""The bookkeeping of requests in flight: cancellation, abort requests, reused ids."""

from triton_vllm_backend.stub.abort import RecentAborts
from triton_vllm_backend.stub.inflight import RequestsInFlight


def test_a_request_is_tracked_until_it_finishes():
    inflight = RequestsInFlight()
    assert inflight.start("r1", "c1", "held")
    assert inflight.ids() == ["r1"] and list(inflight.running()) == [("r1", "held")]
    inflight.finish("r1")
    assert inflight.ids() == [] and inflight.abort_client("c1") == []


def test_an_abort_cancels_every_running_request_with_that_client_id_once():
    inflight = RequestsInFlight()
    for rid in ("r1", "r2"):
        inflight.start(rid, "c1", None)
    inflight.start("r3", "other", None)
    assert sorted(inflight.abort_client("c1")) == ["r1", "r2"]
    assert inflight.is_cancelled("r1") and not inflight.is_cancelled("r3")
    assert [rid for rid, _ in inflight.running()] == ["r3"]
    assert sorted(inflight.to_abort()) == ["r1", "r2"]
    inflight.finish("r1")
    inflight.finish("r2")
    assert inflight.to_abort() == [] and not inflight.is_cancelled("r1")
    assert inflight.start("r4", "c1", None)  # the abort found its targets: not remembered


def test_an_abort_that_finds_only_cancelled_requests_is_remembered():
    inflight = RequestsInFlight()
    inflight.start("r1", "c1", None)
    inflight.cancel("r1")  # its client went away first
    assert inflight.abort_client("c1") == []
    inflight.finish("r1")
    assert not inflight.start("r2", "c1", None)


def test_an_abort_that_comes_first_is_used_up_by_its_request():
    inflight = RequestsInFlight()
    assert inflight.abort_client("c1") == []
    assert not inflight.start("r1", "c1", None)
    assert inflight.ids() == []
    assert inflight.start("r2", "c1", None)  # a reused id runs


def test_requests_without_a_client_id_are_not_abortable_by_id():
    inflight = RequestsInFlight()
    assert inflight.start("r1", "", None)
    assert inflight.abort_client("") == []
    assert not inflight.is_cancelled("r1")


def test_a_disconnected_client_cancels_until_its_request_ends():
    inflight = RequestsInFlight()
    inflight.start("r1", "", None)
    inflight.cancel("r1")
    inflight.cancel("gone")  # ended meanwhile: nothing to do
    assert inflight.to_abort() == ["r1"] and list(inflight.running()) == []
    inflight.finish("r1")
    assert inflight.to_abort() == []


def test_early_aborts_are_forgotten_after_a_while():
    now = [0.0]
    inflight = RequestsInFlight(RecentAborts(remember_s=10, clock=lambda: now[0]))
    inflight.abort_client("c1")
    now[0] = 11
    assert inflight.start("r1", "c1", None)


def test_clear_forgets_everything():
    inflight = RequestsInFlight()
    inflight.start("r1", "c1", None)
    inflight.abort_client("c1")
    inflight.clear()
    assert inflight.ids() == [] and inflight.to_abort() == []
    assert inflight.start("r2", "c1", None)  # the abort found its target: not remembered

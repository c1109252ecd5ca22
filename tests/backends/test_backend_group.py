"""A multi-node group's start and loss (stub/group.py, worker.py): real sockets on loopback,
a leader and its workers in threads."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from triton_vllm_backend import worker
from triton_vllm_backend.stub import group


def _leader(size: int) -> group.Leader:
    return group.Leader(size, 0, host="127.0.0.1")


def _join_in_thread(leader: group.Leader, index: int, size: int | None = None, within=10.0):
    member = group.Member("127.0.0.1", leader.port, index, size or leader.size)
    outcome: dict = {}

    def run():
        try:
            member.join(within)
            outcome["started"] = True
        except group.GroupError as e:
            outcome["error"] = str(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return member, thread, outcome


def test_workers_start_together_once_all_have_joined():
    leader = _leader(3)
    try:
        joined = [_join_in_thread(leader, i) for i in (2, 1)]
        leader.wait_for_workers(10)
        time.sleep(0.2)
        assert all(not outcome for _, _, outcome in joined)  # joined, not yet started
        leader.start(on_lost=lambda why: None)
        for member, thread, outcome in joined:
            thread.join(5)
            assert outcome == {"started": True}
            member.close()
    finally:
        leader.close()


def test_a_missing_worker_fails_the_start_by_name():
    leader = _leader(3)
    try:
        member, _, _ = _join_in_thread(leader, 2)
        started = time.monotonic()
        with pytest.raises(group.GroupError, match=r"worker 1 of the group \(size 3\) did not "
                                                   r"join within 1 s"):
            leader.wait_for_workers(1)
        assert time.monotonic() - started < 3
        member.close()
    finally:
        leader.close()


@pytest.mark.parametrize("index, size, why", [
    (1, 3, "the leader's group has 2 nodes, not 3"),
    (2, 2, "worker index 2 is not in 1..1"),
])
def test_a_worker_of_another_group_is_refused(index, size, why):
    leader = _leader(2)
    try:
        member, thread, outcome = _join_in_thread(leader, index, size)
        with pytest.raises(group.GroupError, match="did not join"):
            leader.wait_for_workers(1.5)
        thread.join(5)
        assert outcome["error"] == f"the leader refused worker {index}: {why}"
        member.close()
    finally:
        leader.close()


def _started_pair():
    leader = _leader(2)
    member, thread, outcome = _join_in_thread(leader, 1)
    leader.wait_for_workers(10)
    lost: list[tuple[float, str]] = []
    leader.start(on_lost=lambda why: lost.append((time.monotonic(), why)))
    thread.join(5)
    assert outcome == {"started": True}
    return leader, member, lost


def test_a_worker_whose_connection_closes_is_lost_at_once():
    leader, member, lost = _started_pair()
    try:
        time.sleep(1.2)  # heartbeats flow: nothing is lost
        assert lost == []
        closed = time.monotonic()
        member.close()
        deadline = time.monotonic() + 2
        while not lost and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(lost) == 1 and lost[0][0] - closed < 0.5
        assert lost[0][1].startswith("worker 1 of the group (at 127.0.0.1) is lost: ")
    finally:
        leader.close()


def test_a_silent_worker_is_lost_after_the_heartbeat_timeout(monkeypatch):
    monkeypatch.setattr(group, "LOST_AFTER_S", 0.6)
    leader = _leader(2)
    raw = socket.create_connection(("127.0.0.1", leader.port))
    try:
        group.send(raw, {"join": 1, "size": 2})
        leader.wait_for_workers(5)
        lost: list[str] = []
        leader.start(on_lost=lost.append)
        time.sleep(1.5)  # the peer never sends a heartbeat
        assert lost == ["worker 1 of the group (at 127.0.0.1) is lost: silent for 1 s"]
    finally:
        raw.close()
        leader.close()


def test_a_peer_that_floods_the_group_port_is_refused_not_buffered():
    leader = _leader(2)
    flood = socket.create_connection(("127.0.0.1", leader.port))
    try:
        flood.sendall(b"x" * (group.MAX_LINE * 4))
        with pytest.raises(group.GroupError, match="did not join"):
            leader.wait_for_workers(1.5)
        flood.settimeout(2)
        assert flood.recv(4096).startswith(b'{"refused": "expected a join, got not a group '
                                           b'message: over 4096 bytes')
    finally:
        flood.close()
        leader.close()


def test_a_worker_sees_its_leader_go():
    leader, member, _ = _started_pair()
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(member.wait_until_lost()), daemon=True)
    thread.start()
    time.sleep(0.8)
    assert seen == []
    leader.close()
    thread.join(3)
    assert seen and seen[0].startswith(f"the leader at 127.0.0.1:{leader.port} is lost: ")
    member.close()


def test_a_worker_that_cannot_reach_its_leader_says_where():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed below: nothing listens there
    member = group.Member("127.0.0.1", port, 1, 2)
    with pytest.raises(group.GroupError, match=f"could not reach the leader at 127.0.0.1:{port} "
                                               "within 1 s"):
        member.join(1)


# ------------------------------------------------------------------- settings
def test_settings_of_an_engine_on_one_node_is_none():
    assert group.settings({"model": "m"}, {}) is None
    assert group.settings({"model": "m", "nnodes": 1}, {}) is None


def test_settings_of_a_group_come_from_the_pod():
    env = {group.PORT_ENV: "4000", group.JOIN_ENV: "30"}
    assert group.settings({"nnodes": 2}, env) == (2, 4000, 30.0)
    assert group.settings({"nnodes": 4}, {}) == (4, group.DEFAULT_PORT, group.DEFAULT_JOIN_S)
    with pytest.raises(group.GroupError, match="node_rank 1: the server runs the group's node 0"):
        group.settings({"nnodes": 2, "node_rank": 1}, {})


def test_the_rendezvous_is_the_leader_unless_the_model_names_one():
    env = {group.LEADER_ADDRESS_ENV: "llm-0.llm"}
    assert group.with_leader_address({"nnodes": 2}, env)["master_addr"] == "llm-0.llm"
    assert group.with_leader_address({"nnodes": 2, "master_addr": "10.0.0.1"}, env)[
        "master_addr"] == "10.0.0.1"
    with pytest.raises(group.GroupError, match="needs vLLM's rendezvous address: --master-addr, "
                                               "or LWS_LEADER_ADDRESS"):
        group.with_leader_address({"nnodes": 2}, {})


def test_a_worker_runs_the_leaders_arguments_as_its_own_node():
    args = worker.rank_args({"model": "/m", "nnodes": 2, "pipeline_parallel_size": 2},
                            "llm-0.llm", 1, 2)
    assert args == {"model": "/m", "nnodes": 2, "pipeline_parallel_size": 2,
                    "node_rank": 1, "master_addr": "llm-0.llm"}
    with pytest.raises(group.GroupError, match="--nnodes is 1 but the group has 2 pods"):
        worker.rank_args({"model": "/m"}, "llm-0.llm", 1, 2)


def test_a_worker_outside_a_group_says_what_is_missing(monkeypatch, capsys):
    for name in (group.LEADER_ADDRESS_ENV, group.WORKER_INDEX_ENV, group.GROUP_SIZE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(group.LEADER_ADDRESS_ENV, "llm-0.llm")
    assert worker.main(["/m"]) == worker.EXIT_GROUP
    assert capsys.readouterr().err == (
        "worker: not in a LeaderWorkerSet group: LWS_WORKER_INDEX, LWS_GROUP_SIZE unset\n")

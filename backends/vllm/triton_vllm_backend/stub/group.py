"""A multi-node group: one engine whose ranks run in several pods, and the leader's watch
over the pods that run the other ranks.

vLLM's own multi-node launcher (`--nnodes N --node-rank R --master-addr A`) starts the
engine's ranks: the leader's (node 0, in this stub) and each worker's (`vllm serve
--headless` on nodes 1..N-1, started by the image's `worker` command, worker.py).  What
it leaves open is what this module adds:

- **Start.** The leader starts its engine only once every worker has joined, and fails
  with the names of the workers missing after `join_s` seconds, instead of vLLM's
  rendezvous waiting as long as torch lets it.
- **Loss.** vLLM notices a lost remote rank only when a collective fails, and then the
  engine hangs (its core waits on ranks that will never answer).  Each worker keeps a
  connection to the leader's group port and sends a heartbeat; a connection that closes
  (the worker's pod died: its kernel closed it) or stays silent for LOST_AFTER_S (its
  node or network went away) ends the group at once: the stub reports its engine dead,
  every request in flight gets its error, and the image's watch ends the container, so
  that a LeaderWorkerSet (RecreateGroupOnPodRestart) starts the group anew.  The worker
  does the same the other way (worker.py): no rank outlives its group.

The protocol, one JSON object per line (an empty line is a heartbeat):

    worker -> leader   {"join": INDEX, "size": N}
    leader -> worker   {"start": true}            every worker has joined
                       {"refused": "why"}         then the connection closes

Only the standard library: the worker's command imports this before vLLM.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

# The leader's group port (the chart's multiNode.groupPort), and how long it waits for
# the workers (multiNode.joinTimeoutSeconds).
PORT_ENV = "TRITON_VLLM_GROUP_PORT"
JOIN_ENV = "TRITON_VLLM_GROUP_JOIN_SECONDS"
DEFAULT_PORT = 29400
DEFAULT_JOIN_S = 300.0
# LeaderWorkerSet's own variables in every pod of a group.
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"

# A group message is a few dozen bytes: a peer that sends more without ending its line
# is not a member, and is not buffered without end.
MAX_LINE = 4096

HEARTBEAT_S = 0.5
# Silence this long is a lost peer: ten heartbeats, so that a busy node's scheduling
# hiccup does not end a group, while a dead node ends it within seconds.
LOST_AFTER_S = 5.0


class GroupError(RuntimeError):
    """The group cannot start or has lost a member; the message says which and why."""


def settings(engine_args: Mapping, environ: Mapping[str, str]) -> tuple[int, int, float] | None:
    """(size, port, join seconds) of the group a model's engine arguments ask for, or None
    for an engine on one node.  The leader serves: its engine is node 0."""
    size = int(engine_args.get("nnodes") or 1)
    if size <= 1:
        return None
    rank = int(engine_args.get("node_rank") or 0)
    if rank != 0:
        raise GroupError(f"node_rank {rank}: the server runs the group's node 0; nodes "
                         f"1..{size - 1} run the image's `worker` command")
    return (size, *port_and_join_s(environ))


def port_and_join_s(environ: Mapping[str, str]) -> tuple[int, float]:
    """The leader's group port, and how long it waits for its workers, as the pod says."""
    return (int(environ.get(PORT_ENV) or DEFAULT_PORT),
            float(environ.get(JOIN_ENV) or DEFAULT_JOIN_S))


def with_leader_address(engine_args: dict, environ: Mapping[str, str]) -> dict:
    """The engine arguments with vLLM's rendezvous address: the model's own master_addr,
    else the group's leader as LeaderWorkerSet names it (this pod)."""
    if engine_args.get("master_addr"):
        return engine_args
    address = environ.get(LEADER_ADDRESS_ENV)
    if not address:
        raise GroupError(f"a model across {engine_args.get('nnodes')} nodes needs vLLM's "
                         f"rendezvous address: --master-addr, or {LEADER_ADDRESS_ENV} "
                         "(set by LeaderWorkerSet in each pod of a group)")
    return {**engine_args, "master_addr": address}


def send(conn: socket.socket, message: dict | None) -> None:
    """One line: the message, or a heartbeat (None)."""
    line = b"\n" if message is None else json.dumps(message).encode() + b"\n"
    conn.sendall(line)


class Lines:
    """The lines a peer sends, a heartbeat counting as a sign of life."""

    def __init__(self, conn: socket.socket):
        self._conn = conn
        self._buffer = b""

    def next(self, timeout: float) -> dict | None:
        """The next message (None for a heartbeat); GroupError when the peer closed the
        connection or said nothing for `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE:
                raise GroupError(f"not a group message: over {MAX_LINE} bytes without a "
                                 "line's end")
            left = deadline - time.monotonic()
            if left <= 0:
                raise GroupError(f"silent for {timeout:.0f} s")
            self._conn.settimeout(left)
            try:
                chunk = self._conn.recv(4096)
            except TimeoutError:
                continue
            except OSError as e:
                raise GroupError(f"connection lost ({e.strerror or e})") from None
            if not chunk:
                raise GroupError("connection closed")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError:
            raise GroupError(f"not a group message: {line[:80]!r}") from None
        if not isinstance(message, dict):
            raise GroupError(f"not a group message: {line[:80]!r}")
        return message


class Leader:
    """Node 0's side: takes the workers' joins on `port`, starts them together, then
    watches them until the group ends."""

    def __init__(self, size: int, port: int, host: str = "0.0.0.0"):
        self.size = size
        self._server = socket.create_server((host, port), reuse_port=False)
        self.port = self._server.getsockname()[1]
        self._workers: dict[int, socket.socket] = {}  # joined, by index
        self._peers: dict[int, str] = {}
        self._members = threading.Lock()  # _workers, against the heartbeat thread
        self._closed = threading.Event()
        self._lost_once = threading.Lock()
        self._lost = False
        # From the first join: a worker that joined early waits, alive, for the others.
        threading.Thread(target=self._beat, name="group-heartbeat", daemon=True).start()

    def wait_for_workers(self, join_s: float) -> None:
        """Returns once workers 1..size-1 have joined; GroupError naming those missing after
        join_s seconds (or a worker that joins with another idea of the group)."""
        deadline = time.monotonic() + join_s
        while len(self._workers) < self.size - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = [i for i in range(1, self.size) if i not in self._workers]
                names = ", ".join(str(i) for i in missing)
                raise GroupError(
                    f"worker{'s' if len(missing) > 1 else ''} {names} of the group "
                    f"(size {self.size}) did not join within {join_s:.0f} s: is "
                    f"{'each' if len(missing) > 1 else 'its'} pod running, and can it "
                    f"reach this pod's port {self.port}?")
            self._server.settimeout(min(left, 1.0))
            try:
                conn, (host, _port) = self._server.accept()
            except TimeoutError:
                continue
            self._join(conn, host, deadline)

    def _join(self, conn: socket.socket, host: str, deadline: float) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            message = Lines(conn).next(max(1.0, min(10.0, deadline - time.monotonic())))
            index, size = int(message["join"]), int(message["size"])
        except (GroupError, KeyError, TypeError, ValueError) as e:
            self._refuse(conn, f"expected a join, got {e}")
            return
        if size != self.size:
            self._refuse(conn, f"the leader's group has {self.size} nodes, not {size}")
            return
        if not 1 <= index < self.size:
            self._refuse(conn, f"worker index {index} is not in 1..{self.size - 1}")
            return
        with self._members:
            previous = self._workers.pop(index, None)
            self._workers[index], self._peers[index] = conn, host
        if previous is not None:  # a restarted worker: its new connection counts
            previous.close()

    @staticmethod
    def _refuse(conn: socket.socket, why: str) -> None:
        try:
            send(conn, {"refused": why})
        except OSError:
            pass
        conn.close()

    def start(self, on_lost: Callable[[str], None]) -> None:
        """Tells every worker to start its ranks, then watches them: on_lost(why) once,
        from a watch thread, when one is lost."""
        self._server.close()  # a group is made once: a late join is a restarted pod
        for _index, conn in sorted(self._workers.items()):
            send(conn, {"start": True})
        for index, conn in self._workers.items():
            threading.Thread(target=self._watch, args=(index, conn, on_lost),
                             name=f"group-worker-{index}", daemon=True).start()

    def _beat(self) -> None:
        while not self._closed.wait(HEARTBEAT_S):
            with self._members:
                workers = list(self._workers.values())
            for conn in workers:
                try:
                    send(conn, None)
                except OSError:
                    pass  # its watch thread reports it

    def _watch(self, index: int, conn: socket.socket, on_lost) -> None:
        lines = Lines(conn)
        while not self._closed.is_set():
            try:
                lines.next(LOST_AFTER_S)
            except GroupError as e:
                if self._closed.is_set():
                    return
                with self._lost_once:
                    if self._lost:
                        return
                    self._lost = True
                on_lost(f"worker {index} of the group (at {self._peers[index]}) is lost: {e}")
                return

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        for conn in self._workers.values():
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def worker_identity(environ: Mapping[str, str] = os.environ) -> tuple[str, int, int]:
    """(leader address, this worker's index, group size) from LeaderWorkerSet's variables."""
    missing = [v for v in (LEADER_ADDRESS_ENV, WORKER_INDEX_ENV, GROUP_SIZE_ENV)
               if not environ.get(v)]
    if missing:
        raise GroupError(f"not in a LeaderWorkerSet group: {', '.join(missing)} unset")
    return (environ[LEADER_ADDRESS_ENV], int(environ[WORKER_INDEX_ENV]),
            int(environ[GROUP_SIZE_ENV]))


class Member:
    """A worker's side: joins the leader, waits for the start, then watches the leader."""

    def __init__(self, leader: str, port: int, index: int, size: int):
        self.leader, self.port, self.index, self.size = leader, port, index, size
        self._conn: socket.socket | None = None
        self._closed = threading.Event()

    def join(self, within_s: float) -> None:
        """Connects (retrying while the leader's server starts) and joins; returns at the
        leader's start.  GroupError when refused, or no start within within_s."""
        deadline = time.monotonic() + within_s
        while True:
            try:
                conn = socket.create_connection((self.leader, self.port), timeout=5)
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise GroupError(f"could not reach the leader at {self.leader}:"
                                     f"{self.port} within {within_s:.0f} s: {e}") from None
                time.sleep(1.0)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        send(conn, {"join": self.index, "size": self.size})
        self._conn = conn
        threading.Thread(target=self._beat, name="group-heartbeat", daemon=True).start()
        lines = Lines(conn)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GroupError(f"the leader at {self.leader}:{self.port} did not start "
                                 f"the group within {within_s:.0f} s")
            try:
                message = lines.next(min(left, LOST_AFTER_S))
            except GroupError as e:
                raise GroupError(f"the leader at {self.leader}:{self.port}: {e}") from None
            if message is None:
                continue
            if "refused" in message:
                raise GroupError(f"the leader refused worker {self.index}: "
                                 f"{message['refused']}")
            if message.get("start"):
                self._lines = lines
                return

    def _beat(self) -> None:
        while not self._closed.wait(HEARTBEAT_S):
            try:
                send(self._conn, None)
            except OSError:
                return

    def wait_until_lost(self) -> str:
        """Blocks while the leader lives; why it is lost."""
        while True:
            try:
                self._lines.next(LOST_AFTER_S)
            except GroupError as e:
                return f"the leader at {self.leader}:{self.port} is lost: {e}"

    def close(self) -> None:
        self._closed.set()
        if self._conn is not None:
            self._conn.close()

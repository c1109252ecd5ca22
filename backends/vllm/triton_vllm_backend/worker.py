"""Run a multi-node group's worker: this pod's ranks of the engine that the leader serves.

    python3 -m triton_vllm_backend.worker --models FILE.yaml
    python3 -m triton_vllm_backend.worker MODEL [VLLM FLAGS]

(the image's `worker` command).  The model and its flags are the leader's, as `serve`
reads them (one model; the chart mounts the same models file in every pod of a group),
so both sides build the engine from the same arguments.  LeaderWorkerSet's variables
say where the leader is and which node this is (LWS_LEADER_ADDRESS, LWS_WORKER_INDEX,
LWS_GROUP_SIZE); TRITON_VLLM_GROUP_PORT, the leader's group port.

The worker joins the leader's group (stub/group.py), waits for its start, then runs
its ranks as `vllm serve --headless` does (vLLM's multiproc executor, node_rank = the
worker's index, master_addr = the leader).  It exits, and so ends its pod, when its ranks
end or the leader is lost: a group lives and dies whole.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from triton_vllm_backend.stub import group

# Exit codes: the group failed (could not join, refused, leader lost), the ranks ended.
EXIT_GROUP = 3
EXIT_RANKS = 4


def engine_args_of(argv: list[str]) -> dict:
    """The engine arguments of the one model that serve's flags (or models file) name."""
    from triton_vllm_backend import serve  # vLLM's parser: seconds to import
    served = serve.parse(argv)
    if len(served.specs) != 1:
        raise serve.ServeError(f"a group serves one model; {len(served.specs)} are given")
    return dict(served.specs[0].engine_args)


def rank_args(engine_args: dict, leader: str, index: int, size: int) -> dict:
    """This node's engine arguments: the leader's, as node `index` of `size`."""
    nnodes = int(engine_args.get("nnodes") or 1)
    if nnodes != size:
        raise group.GroupError(f"the model's --nnodes is {nnodes} but the group has {size} "
                               "pods")
    return {**engine_args, "node_rank": index,
            "master_addr": engine_args.get("master_addr") or leader}


def run_ranks(engine_args: dict) -> None:
    """This node's ranks, until they end: `vllm serve --headless` (vLLM's run_headless) on
    the engine arguments the leader's model.json holds."""
    from vllm.platforms import current_platform
    try:
        # `vllm serve`'s own module: its parser and headless runner, wherever a vLLM
        # release keeps the parser's code.
        from vllm.entrypoints.cli import serve as vllm_serve
    except ImportError as e:
        raise group.GroupError(f"this vLLM has no `vllm serve --headless` to run a "
                               f"worker's ranks: {e}") from None

    from triton_vllm_backend.serve import flexible_parser
    from triton_vllm_backend.stub import engine_config
    # The leader's stub adds the same worker hook: every rank runs the same worker.
    engine_args = engine_config.with_amx_worker(engine_args, current_platform.is_cpu())
    args = vllm_serve.make_arg_parser(flexible_parser()).parse_args([])
    for name, value in engine_args.items():
        setattr(args, name, value)
    args.api_server_count = 0  # as `vllm serve --headless` sets it: no API server here
    vllm_serve.run_headless(args)


def _end_when_lost(member: group.Member) -> None:
    why = member.wait_until_lost()
    print(f"worker: {why}; ending this node's ranks", file=sys.stderr, flush=True)
    # The ranks are this process's children: vLLM's workers end with their parent.
    os._exit(EXIT_GROUP)


def _stop(_signum, _frame):
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[0].strip(), file=sys.stderr)
        return 0 if argv else 2
    try:
        leader, index, size = group.worker_identity(os.environ)
        args = rank_args(engine_args_of(argv), leader, index, size)
        port, join_s = group.port_and_join_s(os.environ)
        # The leader waits join_s for its workers; a worker waits as long for the start,
        # plus the leader's own start, which comes first.
        within = 2 * join_s
        member = group.Member(leader, port, index, size)
        print(f"worker: node {index} of {size}, joining the leader at {leader}:{port}",
              file=sys.stderr, flush=True)
        member.join(within)
    except (group.GroupError, ValueError) as e:
        print(f"worker: {e}", file=sys.stderr, flush=True)
        return EXIT_GROUP
    print(f"worker: the group started; running node {index}'s ranks", file=sys.stderr,
          flush=True)
    threading.Thread(target=_end_when_lost, args=(member,), daemon=True).start()
    signal.signal(signal.SIGTERM, _stop)  # the pod's end: the ranks stop with this process
    try:
        run_ranks(args)
    except (SystemExit, KeyboardInterrupt):
        return 0
    print(f"worker: node {index}'s ranks ended", file=sys.stderr, flush=True)
    return EXIT_RANKS


if __name__ == "__main__":
    sys.exit(main())

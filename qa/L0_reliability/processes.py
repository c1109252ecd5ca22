"""The processes of a container of the image's default command, as the host sees them.

tritonserver, the OpenAI frontend and the model watch (triton_vllm_backend/watch.py);
vLLM runs its engine core and its worker as processes of their own under the Python
backend's stub.  Each is known by what its command line holds (as `docker top` shows it).
"""
from __future__ import annotations

from qa.L0_image.conftest import docker

MARKERS = {
    "engine core": "VLLM::EngineCore",
    "worker": "VLLM::Worker",
    "stub": "triton_python_backend_stub",
    "tritonserver": "tritonserver --model-repository",
    "frontend": "triton-openai",
    "watch": "triton_vllm_backend.watch",
}


def _top(cid: str) -> list[tuple[int, int, str]]:
    """(host PID, resident KiB, command line) of each process of the container."""
    rows = []
    for line in docker("top", cid, "-eo", "pid,rss,args").stdout.splitlines()[1:]:
        pid, rss, args = line.split(None, 2)
        rows.append((int(pid), int(rss), args))
    return rows


def host_pids(cid: str, process: str) -> list[int]:
    """PIDs on this host of the container's `process` (a key of MARKERS)."""
    return [pid for pid, _, args in _top(cid) if MARKERS[process] in args]


def resident_mib(cid: str) -> dict[str, float]:
    """Resident memory of each process of MARKERS, in MiB (0 for one that is not there)."""
    rows = _top(cid)
    return {process: round(sum(rss for _, rss, args in rows if marker in args) / 1024, 1)
            for process, marker in MARKERS.items()}

#!/usr/bin/env python3
"""Let vLLM's shared-memory readers sleep between polls: `VLLM_SHM_BROADCAST_BUSY_SLEEP_S`.

vLLM's multiprocess executor hands each engine step to its worker process, and the
worker's results back to the engine core, through shared-memory queues.  A reader waits
for the next message in a loop of `sched_yield()` for a whole second after its last
message (`SpinCondition.wait` in vllm/distributed/device_communicators/shm_broadcast.py),
and under load a message comes every step: the engine core spins while the worker
computes, and the worker while the engine core schedules.  vLLM on the CPU always runs
that executor, so a CPU server has two processes burning a core each on top of the
model's compute, and the server processes that stream the tokens wait for the CPU behind
them.  On 2 cores at 8 streams this took the engine core from 21 % to 55-60 % of a core
and made first tokens 5-10 times slower, whichever server fronted the engine.

The patch adds one setting, the one proposed upstream (vllm-project/vllm#52848): after
each yield of the busy loop, sleep `VLLM_SHM_BROADCAST_BUSY_SLEEP_S` seconds.  Unset or 0
keeps vLLM's behaviour; the CPU image sets 0.0001, so a reader checks for its message
every ~0.1 ms instead of without pause.  Nothing else changes: the one-second window, the
idle wait on the notification socket, the writer.

    python vllm_shm_busy_sleep.py [FILE]

FILE defaults to the installed vLLM's shm_broadcast.py.  The patch is applied once (a
second run finds it applied and leaves the file alone); a file without the expected code
is an error, exit 1, and stays as it was: a vLLM whose reader loop changed needs this
looked at again, not patched blindly.
"""

from __future__ import annotations

import py_compile
import sys
from pathlib import Path

SETTING = "VLLM_SHM_BROADCAST_BUSY_SLEEP_S"
MARKER = f"# {SETTING}: patched in by the image build"

# Where the setting is read: after the import of sched_yield, which the busy loop calls.
IMPORT_ANCHOR = "from vllm.distributed.utils import StatelessProcessGroup, sched_yield\n"
READ_SETTING = f'''
{MARKER}
# (dockerfiles/patches/vllm_shm_busy_sleep.py says why).


def _busy_sleep_s() -> float:
    raw = os.environ.get("{SETTING}", "").strip()
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:  # NaN fails this too
        raise ValueError("{SETTING} must be seconds, at least 0 and below 1 "
                         f"(0 keeps vLLM's busy loop), not {{raw!r}}")
    return value


_BUSY_SLEEP_S = _busy_sleep_s()
'''

# The busy branch of SpinCondition.wait().
BUSY_ANCHOR = """        if current_time <= self.last_read + self.busy_loop_s:
            sched_yield()
"""
BUSY_PATCHED = BUSY_ANCHOR + """            if _BUSY_SLEEP_S:
                time.sleep(_BUSY_SLEEP_S)
"""


class PatchError(Exception):
    pass


def patched(source: str) -> str:
    """The module's source with the setting; PatchError when an anchor is not found
    exactly once, or the module does not import `os` and `time` itself."""
    if MARKER in source:
        return source
    for anchor in (IMPORT_ANCHOR, BUSY_ANCHOR):
        count = source.count(anchor)
        if count != 1:
            raise PatchError(f"expected this code once, found it {count} times:\n{anchor}")
    for module in ("os", "time"):
        if f"\nimport {module}\n" not in source:
            raise PatchError(f"the module no longer imports {module}")
    source = source.replace(IMPORT_ANCHOR, IMPORT_ANCHOR + READ_SETTING)
    return source.replace(BUSY_ANCHOR, BUSY_PATCHED)


def installed_module() -> Path:
    # Found without importing vLLM: the module imports torch, and the build needs neither.
    from importlib.util import find_spec
    spec = find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise PatchError("vLLM is not installed in this Python")
    path = Path(list(spec.submodule_search_locations)[0])
    return path / "distributed" / "device_communicators" / "shm_broadcast.py"


def main(argv: list[str]) -> int:
    try:
        path = Path(argv[0]) if argv else installed_module()
        source = path.read_text()
        new = patched(source)
    except (OSError, PatchError) as e:
        print(f"vllm_shm_busy_sleep: cannot patch vLLM's reader loop: {e}", file=sys.stderr)
        return 1
    if new == source:
        print(f"vllm_shm_busy_sleep: {path} has the setting already")
        return 0
    path.write_text(new)
    # Compiled again now: the pip-compiled copy is stale, and the image's user could not
    # rewrite it, so every start would compile the module anew.
    py_compile.compile(str(path), doraise=True)
    print(f"vllm_shm_busy_sleep: {path} reads {SETTING}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

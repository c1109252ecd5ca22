"""Reading a figure off Triton's Prometheus page once it holds still."""

from __future__ import annotations

import time
from collections.abc import Callable


def settled(read: Callable[[], float], name: str, interval: float = 0.3,
            tries: int = 100) -> float:
    """What `read()` gives once two reads `interval` seconds apart agree.

    The vLLM backend applies vLLM's statistics from a queue, at most every 0.1 s, so a
    count read right after a request may still grow."""
    last = read()
    for _ in range(tries):
        time.sleep(interval)
        now = read()
        if now == last:
            return now
        last = now
    raise AssertionError(f"{name} kept moving")

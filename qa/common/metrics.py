"""Reading figures off Triton's Prometheus page."""

from __future__ import annotations

import time
from collections.abc import Callable


def series_total(page: str, name: str, **labels) -> float:
    """The sum of `name`'s series on a Prometheus text page whose labels include
    `labels`; 0 when there is none."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in page.splitlines():
        if line.startswith(name + "{") and all(w in line for w in want):
            total += float(line.rsplit(" ", 1)[1])
    return total


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

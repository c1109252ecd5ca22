"""Reading figures off a Prometheus text page (Triton's, or the OpenAI frontend's, which
carries Triton's), with prometheus_client's own parser."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


@lru_cache(maxsize=16)  # a test reads several figures off one page
def _families(page: str) -> tuple:
    try:
        return tuple(text_string_to_metric_families(page))
    except ValueError as err:
        raise ValueError(f"not a Prometheus text page ({err}): {page[:200]!r}") from err


def samples(page: str, name: str, **labels: str) -> list[Sample]:
    """The samples called `name` (with its `_total`, `_bucket`, `_count` suffix, as on the
    page) whose labels include each of `labels` with exactly that value."""
    families = _families(page)
    named = [s for f in families for s in f.samples if s.name == name]
    if not named and not any(f.name == name and f.type != "counter" for f in families):
        # The parser names a counter's samples `<name>_total` even where the page wrote
        # them without the suffix, as Triton's nv_* counters are.
        named = [s for f in families if f.name == name and f.type == "counter"
                 for s in f.samples if s.name == name + "_total"]
    return [s for s in named if all(s.labels.get(k) == str(v) for k, v in labels.items())]


def series_total(page: str, name: str, **labels: str) -> float:
    """The sum of `samples(page, name, **labels)`; 0 when there is none."""
    return sum(s.value for s in samples(page, name, **labels))


def metric_type(page: str, name: str) -> str | None:
    """The declared type (counter, gauge, histogram, ...) of the metric whose samples are
    called `name`, or that is called `name`; None when the page has no such metric."""
    families = _families(page)
    for family in families:
        if any(s.name == name for s in family.samples) or (
                family.name == name and family.type != "counter"):
            return family.type
    if any(f.type == "counter" and name in (f.name, f.name + "_total") for f in families):
        return "counter"  # declared, no series yet
    return None


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

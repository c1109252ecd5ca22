"""Lone UTF-16 surrogates in a request's JSON.

JSON may spell any UTF-16 code unit, `"\\ud800"` alone too, and Python's parser turns it
into a str that no encoder takes: tokenizing, a Triton request or an answer that echoes
it would fail deep inside, after the request was accepted (a stream's 200 already sent).
A request is checked once, as it comes in, so that it gets a 400 naming the field.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# What a list of token ids holds: skipped in one C-level pass (a body of 10 MB can hold
# millions of them, which an item-by-item walk would take seconds over).
_SCALARS = frozenset({int, float, bool, type(None)})


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def lone_surrogate_at(data: Any) -> str | None:
    """Where in parsed JSON a string (or a key) holds a lone surrogate, as a parameter
    path (`messages[0].content`; "" for the top level); None when nowhere."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if _has_surrogate(value):
                return path
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _has_surrogate(key):
                    return _child(path, key)
                if type(item) not in _SCALARS:
                    stack.append((item, _child(path, key)))
        elif isinstance(value, list) and not _SCALARS.issuperset(map(type, value)):
            stack.extend((item, _child(path, i)) for i, item in enumerate(value)
                         if type(item) not in _SCALARS)
    return None

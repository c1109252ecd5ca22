"""Server-sent events, encoded cheaply: one msgspec call per chunk, no pydantic per token."""

from __future__ import annotations

import msgspec

_encode = msgspec.json.Encoder().encode

DONE = b"data: [DONE]\n\n"


def event(payload: dict) -> bytes:
    return b"data: " + _encode(payload) + b"\n\n"


def dumps(payload) -> bytes:
    return _encode(payload)

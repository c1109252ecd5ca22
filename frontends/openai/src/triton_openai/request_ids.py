"""Request ids: the `id` of an OpenAI answer, and the Triton request id that abort
requests name."""

from __future__ import annotations

import uuid


def request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"

"""How to ask a model for its health through a client: its `model_health`.

The HTTP client's is here for now, on its connection pool: Triton's `generate` endpoint
with the health parameter, as the backend's own watch asks it.  It belongs in
`http_client.py` as `HttpTritonClient.model_health`, beside the abort request.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import quote

from .http_client import HttpTritonClient, _status_error
from .vllm_contract import HEALTH_PARAMETER

_HEALTH_BODY = json.dumps({"parameters": {HEALTH_PARAMETER: True}}).encode()


async def _over_http(client: HttpTritonClient, model: str) -> None:
    conn = await client._open("POST", f"/v2/models/{quote(model)}/generate", _HEALTH_BODY,
                              False)
    try:
        reply = await conn.body()
    except BaseException:
        conn.close()  # the caller gave up waiting: the connection cannot be reused
        raise
    client._release(conn)
    # Triton answers a model's error with a 400 whatever its kind; model_error reads it.
    if conn.status != 200 or b'"error"' in reply:
        raise _status_error(conn.status, reply)


def ask_health(client) -> Callable[[str], Awaitable[None]] | None:
    """The client's way to ask a model for its health; None when it has none (a test's
    fake), and then nothing is watched."""
    own = getattr(client, "model_health", None)
    if own is not None:
        return own
    if isinstance(client, HttpTritonClient):
        return partial(_over_http, client)
    return None

"""Request ids: one per HTTP request, from the client's `X-Request-Id` or made here.

The same id is echoed on the response, written in the access log, and sent as the Triton
request id of every Triton request the HTTP request makes (the vLLM backend names it in
its log lines and in vLLM's request ids), so one grep follows a request through the
frontend, Triton and the engine.  The id of an OpenAI answer (`chatcmpl-...`) is made
from it as well.
"""

from __future__ import annotations

import contextvars
import re
import uuid

HEADER = "x-request-id"
MAX_LENGTH = 128
# Printable ASCII without spaces: the id goes into log lines and Triton's protocols.
_VALID = re.compile(rf"^[\x21-\x7e]{{1,{MAX_LENGTH}}}$")

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def new_id() -> str:
    return uuid.uuid4().hex


def is_valid(value: str) -> bool:
    return bool(_VALID.match(value))


def set_current(value: str) -> contextvars.Token:
    """Make `value` the id of the HTTP request being served (the access middleware does)."""
    return _current.set(value)


def reset_current(token: contextvars.Token) -> None:
    _current.reset(token)


def current() -> str:
    """The id of the HTTP request being served; a new one outside a request."""
    value = _current.get()
    if value is None:
        value = new_id()
        _current.set(value)
    return value


def request_id(prefix: str) -> str:
    """The `id` of an OpenAI answer: its kind, then the request's id."""
    return f"{prefix}-{current()}"

"""Request ids: the client's, to read, and one of our own, to act on.

A client may send `X-Request-Id`; it is echoed on the response and written in the access
log, and nothing else.  Clients reuse ids (a proxy's retry keeps its `x-request-id`), so
an id shared by two requests must not make them one: each HTTP request also gets an
internal id of its own (a new uuid4), the Triton request id of every Triton request it
makes, the one an abort names (the vLLM backend's log lines and vLLM's request ids carry
it) and the one OpenAI answer ids are made from (`chatcmpl-...`).  The access log line
carries both, so one grep follows a request from the client's id to the engine's log.
A request that sends no id is answered with its internal one.
"""

from __future__ import annotations

import contextvars
import re
import uuid

HEADER = "x-request-id"
MAX_LENGTH = 128
# Printable ASCII without spaces: the id goes into log lines and headers.
_VALID = re.compile(rf"[\x21-\x7e]{{1,{MAX_LENGTH}}}")

# (internal id, the client's id or None) of the HTTP request being served.
_current: contextvars.ContextVar[tuple[str, str | None] | None] = contextvars.ContextVar(
    "request_id", default=None)


def new_id() -> str:
    return uuid.uuid4().hex


def is_valid(value: str) -> bool:
    # fullmatch: `$` would also match before a final newline.
    return _VALID.fullmatch(value) is not None


def set_current(internal: str, given: str | None) -> contextvars.Token:
    """Make these the ids of the HTTP request being served (the access middleware does)."""
    return _current.set((internal, given))


def reset_current(token: contextvars.Token) -> None:
    _current.reset(token)


def current() -> str:
    """The internal id of the HTTP request being served; a new one outside a request."""
    ids = _current.get()
    if ids is None:
        ids = (new_id(), None)
        _current.set(ids)
    return ids[0]


def given() -> str | None:
    """The id the client sent with the HTTP request being served, if any."""
    ids = _current.get()
    return None if ids is None else ids[1]


def request_id(prefix: str) -> str:
    """The `id` of an OpenAI answer: its kind, then the request's internal id."""
    return f"{prefix}-{current()}"

"""Plain HTTP calls of the suites and the harness, with the standard library alone: the
status a URL answers, and the JSON answer of a GET or of a POST of a JSON body.

The harness polls with these before any client library is set up (a registry, a server
starting), and the suites use them where a test asks one small question of a server.

    status, answer = request_json(url + "/v1/completions", {"model": "m", "prompt": "a"})
    models = fetch_json(url + "/v1/models")["data"]
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any


def http_status(url: str, timeout: float = 3, headers: Mapping[str, str] | None = None) -> int:
    """The HTTP status `url` answers a GET with; 0 when nothing answers."""
    try:
        request = urllib.request.Request(url, headers=dict(headers or {}))
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def _error_answer(raw: bytes) -> Any:
    """An error status's body: its JSON, or its text as {"error": text}."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {"error": raw.decode(errors="replace")}


def request_json(url: str, body: Any = None, *, headers: Mapping[str, str] | None = None,
                 timeout: float = 60) -> tuple[int, Any]:
    """(status, answer) of a GET of `url`, or of a POST of `body` as JSON.

    Never raises for the server's sake, so that a test can assert on the status and show
    the answer: an error status comes with its body (JSON, or {"error": its text}), and a
    server that does not answer is (0, {"error": why})."""
    data = None if body is None else json.dumps(body).encode()
    sent = {**({} if data is None else {"content-type": "application/json"}), **(headers or {})}
    request = urllib.request.Request(url, data=data, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as e:
        return e.code, _error_answer(e.read())
    except OSError as e:
        return 0, {"error": str(e)}


def fetch_json(url: str, body: Any = None, *, headers: Mapping[str, str] | None = None,
               timeout: float = 60) -> Any:
    """The JSON answer of a request that must succeed (as request_json() sends it); any
    other status is an AssertionError naming the URL, the status and the answer."""
    status, answer = request_json(url, body, headers=headers, timeout=timeout)
    if not 200 <= status < 300:
        raise AssertionError(f"{url} answered {status or 'nothing'}: {answer}")
    return answer

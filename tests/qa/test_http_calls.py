"""qa/common/http_calls.py against a small HTTP server in this process."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from qa.common.http_calls import fetch_json, http_status, request_json
from qa.common.served import free_port


class _Handler(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: bytes, content_type: str = "application/json"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/models":
            self._answer(200, b'{"data": [{"id": "m"}]}')
        elif self.path == "/private":
            allowed = self.headers.get("Authorization") == "Bearer k"
            self._answer(200 if allowed else 401, b"{}")
        elif self.path == "/broken":
            self._answer(500, b"Internal Server Error", "text/plain")
        elif self.path == "/empty":
            self._answer(204, b"")
        else:
            self._answer(404, b'{"error": "no such path"}')

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"]))
        self._answer(200, json.dumps({"got": json.loads(body),
                                      "type": self.headers["content-type"]}).encode())

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def url():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_status_with_and_without_headers(url):
    assert http_status(url + "/models") == 200
    assert http_status(url + "/private") == 401
    assert http_status(url + "/private", headers={"Authorization": "Bearer k"}) == 200
    assert http_status(f"http://127.0.0.1:{free_port()}/") == 0  # nothing listens


def test_request_json_gets_and_posts(url):
    assert request_json(url + "/models") == (200, {"data": [{"id": "m"}]})
    assert request_json(url + "/echo", {"prompt": "Hello"}) == (
        200, {"got": {"prompt": "Hello"}, "type": "application/json"})
    assert request_json(url + "/empty") == (204, {})


def test_request_json_returns_what_an_error_says(url):
    assert request_json(url + "/nowhere") == (404, {"error": "no such path"})
    assert request_json(url + "/broken") == (500, {"error": "Internal Server Error"})
    status, answer = request_json(f"http://127.0.0.1:{free_port()}/", timeout=5)
    assert status == 0 and "refused" in answer["error"]


def test_fetch_json_answers_or_names_the_failure(url):
    assert fetch_json(url + "/models")["data"] == [{"id": "m"}]
    assert fetch_json(url + "/private", headers={"Authorization": "Bearer k"}) == {}
    with pytest.raises(AssertionError, match=r"/nowhere answered 404: \{'error': 'no such"):
        fetch_json(url + "/nowhere")
    with pytest.raises(AssertionError, match=r"answered nothing: \{'error': "):
        fetch_json(f"http://127.0.0.1:{free_port()}/", timeout=5)

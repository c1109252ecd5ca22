"""The access log line: one line per request whatever the client sends, in both formats."""

import json
import logging

import pytest

from triton_openai import FrontendConfig


@pytest.mark.parametrize("value, logged", [
    ("/v1/models", "/v1/models"),
    ("/v1/x\nGET /v1/forged", "/v1/x\\nGET /v1/forged"),
    ("/v1/x\r\n", "/v1/x\\r\\n"),
    ("/\x1b[31mred", "/\\x1b[31mred"),
    ("/a\\nb", "/a\\\\nb"),  # a backslash the client sent cannot pose as an escape
    ("/\u2028\u0085\u200b\x7f", "/\\u2028\\x85\\u200b\\x7f"),
    ("/caf\xe9/\u6a21\u578b", "/caf\xe9/\u6a21\u578b"),  # printable text stays as it is
    ("/\ud800", "/\\ud800"),
])
def test_unprintable_text_is_escaped(value, logged):
    from triton_openai.text.printable import printable

    assert printable(value) == logged


def _lines(caplog):
    return [rec.getMessage() for rec in caplog.records if rec.name == "triton_openai.access"]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_percent_encoded_newline_cannot_forge_a_line(make_client, caplog, log_format):
    caplog.set_level(logging.INFO, logger="triton_openai.access")
    c = make_client(FrontendConfig(triton_metrics_url=None, log_format=log_format))
    r = c.get("/v1/models%0a127.0.0.1:1%20%22GET%20/admin%22%20200%0d%1b[2J")
    assert r.status_code == 404
    [line] = _lines(caplog)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    escaped = '/v1/models\\n127.0.0.1:1 "GET /admin" 200\\r\\x1b[2J'
    if log_format == "json":
        assert json.loads(line)["path"] == escaped
    else:
        assert f'"GET {escaped}" 404 ' in line


def test_a_json_line_names_both_ids(make_client, caplog):
    caplog.set_level(logging.INFO, logger="triton_openai.access")
    c = make_client(FrontendConfig(triton_metrics_url=None, log_format="json"))
    r = c.post("/v1/completions", headers={"X-Request-Id": "trace-7"},
               json={"model": "llm", "prompt": "a", "max_tokens": 1})
    line = json.loads(_lines(caplog)[0])
    assert line["request_id"] == "trace-7"
    assert line["internal_request_id"] == r.json()["id"].removeprefix("cmpl-")
    c.get("/v1/models")
    line = json.loads(_lines(caplog)[1])
    assert line["request_id"] is None and len(line["internal_request_id"]) == 32

"""Property-based requests over the frontend's own OpenAPI document (schemathesis): every
route, with bodies that follow the schema and bodies that break it, answered without a
5xx.  A 5xx here is a request a client can make that the server did not expect.

Bounded in time (--max-time) and examples, so the run stops by itself; the seed is fixed
so that a failure can be replayed with the command the assertion prints.  The bodies name
the served model and ask for few tokens (fuzz_hooks.py), so that they reach the
generation path rather than the model lookup's 404, and the engine stays quick."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qa.common.figures import record

from .conftest import MODEL

pytestmark = pytest.mark.docker

SEED = 40
MAX_SECONDS = 60
MAX_EXAMPLES = 12
HOOKS = Path(__file__).with_name("fuzz_hooks.py")


def test_no_request_the_schema_allows_or_breaks_gets_a_5xx(target, tmp_path):
    schemathesis = Path(sys.executable).with_name("st")
    argv = [str(schemathesis), "run", f"{target.url('openai')}/openapi.json",
            "--checks", "not_a_server_error",
            "--header", f"Authorization: Bearer {target.api_key}",
            "--phases", "examples,coverage,fuzzing",
            "--max-examples", str(MAX_EXAMPLES), "--max-time", str(MAX_SECONDS),
            "--seed", str(SEED), "--request-timeout", "60",
            "--suppress-health-check", "all", "--no-shrink",
            # One worker: hypothesis describes its strategies with ast.parse, which on
            # Python 3.11 fails now and then when two threads parse at once ("AST
            # constructor recursion depth mismatch"), an error of the tool, not the server.
            "--workers", "1",
            # /health/ready?model=X answers 503 for a model it does not serve: that is the
            # readiness probe's "not ready", by design, not a server error.
            "--exclude-path", "/health/ready"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=MAX_SECONDS + 240,
                         cwd=tmp_path, env={**os.environ, "NO_COLOR": "1",
                                            "SCHEMATHESIS_HOOKS": str(HOOKS),
                                            "TVB_FUZZ_MODEL": MODEL})
    printed = out.stdout + out.stderr
    cases = re.search(r"(\d+) generated", printed)
    record("openapi_fuzz_requests", int(cases.group(1)) if cases else 0, "requests",
           f"schemathesis, {MAX_EXAMPLES} examples per operation and phase, "
           f"at most {MAX_SECONDS} s; every answer below 500")
    shown = " ".join("'Authorization: Bearer $KEY'" if "Bearer" in a else a for a in argv)
    assert out.returncode == 0, \
        f"schemathesis found server errors (SCHEMATHESIS_HOOKS={HOOKS} {shown}):\n" \
        f"{printed[-6000:]}"
    assert cases and int(cases.group(1)) > 0, printed[-3000:]

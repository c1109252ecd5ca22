"""Helpers of the vLLM backend suite: the tiny model's settings, vLLM's offline engine
as the reference, and small clients for Triton's generate endpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from qa.common.models import TEST_ENGINE_DEFAULTS
from qa.common.sse import iter_events
from qa.common.tritonserver import ENGINE_ENV

HERE = Path(__file__).resolve().parent
MODEL = "tiny"
# The pooling model beside it: all-MiniLM-L6-v2, from the test extras.
MINILM = "minilm"

# Prompts the outputs are compared on: different lengths, punctuation, digits.
PROMPTS = [
    "Hello, my name is",
    "The capital of France is",
    "Once upon a time, in a land far away,",
    "1 2 3 4 5",
]


# The sampling the served outputs are compared to vLLM's offline engine's on.
GREEDY = {"temperature": 0, "max_tokens": 16, "ignore_eos": True}


def engine_args(model_path: Path) -> dict:
    """The tiny model's engine arguments, the same for the server and the reference
    (write_vllm_model's test defaults included, so that both run eager)."""
    return {
        **TEST_ENGINE_DEFAULTS,
        "model": str(model_path),
        "dtype": "float32",
        "max_model_len": 2048,
        "enable_prefix_caching": False,
        "disable_log_stats": False,
    }


class OfflineReference:
    """vLLM's offline LLM generating for `prompts` in a subprocess of its own, started at
    once (job and all) so that it loads while the server under test starts; `outputs()`
    waits.  Its log goes to a file: a pipe nobody reads would stall it when full."""

    def __init__(self, model_path: Path, prompts: list[str], sampling: dict):
        env = dict(os.environ, **ENGINE_ENV)
        job = {"engine_args": engine_args(model_path), "prompts": prompts, "sampling": sampling}
        self._log = tempfile.TemporaryFile("w+")
        self._proc = subprocess.Popen([sys.executable, str(HERE / "offline_llm.py")],
                                      stdin=subprocess.PIPE, stdout=self._log,
                                      stderr=subprocess.STDOUT, text=True, env=env)
        self._proc.stdin.write(json.dumps(job))
        self._proc.stdin.close()
        self._outputs = None

    def outputs(self, timeout: float = 600) -> list[dict]:
        if self._outputs is None:
            self._proc.wait(timeout)
            self._log.seek(0)
            out = self._log.read()
            results = [line for line in out.splitlines() if line.startswith("RESULT ")]
            assert self._proc.returncode == 0 and results, out[-4000:]
            self._outputs = json.loads(results[-1][len("RESULT "):])["outputs"]
        return self._outputs

    def close(self):
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


def generate_body(prompt=None, sampling: dict | None = None, **inputs) -> dict:
    body = dict(inputs)
    if prompt is not None:
        body["text_input"] = prompt
    if sampling is not None:
        body["sampling_parameters"] = json.dumps(sampling)
    return body


def generate(server, model, prompt=None, sampling=None, timeout=120, **inputs) -> httpx.Response:
    """POST /v2/models/M/generate; returns the raw response (check status yourself)."""
    return httpx.post(f"{server.http_url}/v2/models/{model}/generate",
                      json=generate_body(prompt, sampling, **inputs), timeout=timeout)


def generate_stream(server, model, prompt=None, sampling=None, timeout=120,
                    **inputs) -> list[dict]:
    """POST /v2/models/M/generate_stream with stream=true; returns every event."""
    body = generate_body(prompt, sampling, stream=True, **inputs)
    with httpx.stream("POST", f"{server.http_url}/v2/models/{model}/generate_stream",
                      json=body, timeout=timeout) as response:
        response.raise_for_status()
        return [event.json() for event in iter_events(response)]


def as_list(value):
    """Triton's JSON answers flatten one-element outputs to a scalar."""
    return value if isinstance(value, list) else [value]

"""`./build.py --serve-model DIR --serve-model-args FLAGS`: an image with the model and
the repository the image's own `serve` made for it at build time, served by the default
command; a flag vLLM does not take fails the build with vLLM's message."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from qa.common import free_port
from qa.common.docker import docker

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker
READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "180"))
TAG = os.environ.get("TVB_IMAGE_TAG", "tritonserver-vllm:test") + "-served"


def build(tmp_path: Path, model: Path, args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(REPO / "build.py"), "--backend=vllm", "--endpoint=openai",
            f"--build-dir={tmp_path / 'build'}", f"--tag={TAG}", "-v",
            f"--serve-model={model}", f"--serve-model-args={args}"]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)


def get(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.load(r)


def test_a_bad_flag_fails_the_build_with_vllms_message(tiny_model, tmp_path):
    out = build(tmp_path, tiny_model, "--max-model-len 2048 --no-such-flag")
    assert out.returncode != 0
    assert "serve: error: unrecognized arguments: --no-such-flag" in out.stdout + out.stderr


def test_the_baked_model_is_served_by_default(tiny_model, tmp_path):
    # Eager: what is tested is the bake, and compiling the tiny model adds 15-35 s to the
    # start (the README's own serve line, in qa/L0_image, compiles).
    out = build(tmp_path, tiny_model,
                "--max-model-len 2048 --served-model-name my-llm --enforce-eager")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    http, openai = free_port(), free_port()
    cid = docker("run", "-d", "--shm-size=1g", "-p", f"127.0.0.1:{http}:8000",
                 "-p", f"127.0.0.1:{openai}:9000", TAG).stdout.strip()
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                models = get(f"http://127.0.0.1:{openai}/v1/models")
                break
            except OSError:
                state = docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip()
                assert state == "true", docker("logs", cid, check=False).stderr[-3000:]
                assert time.monotonic() < deadline, "not ready"
                time.sleep(1)
        assert [m["id"] for m in models["data"]] == ["my-llm"]
        config = get(f"http://127.0.0.1:{http}/v2/models/my-llm/config")
        assert config["parameters"]["vllm_model"]["string_value"] == \
            f"/opt/models/{tiny_model.name}"
        answer = get(f"http://127.0.0.1:{openai}/v1/completions",
                     {"model": "my-llm", "prompt": "Hello", "max_tokens": 4, "temperature": 0})
        assert answer["usage"]["completion_tokens"] == 4
    finally:
        docker("rm", "-f", cid, check=False)
        docker("image", "rm", TAG, check=False)

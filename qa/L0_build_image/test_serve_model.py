"""`./build.py --serve-model DIR --serve-model-args FLAGS`: an image with the model and
the repository the image's own `serve` made for it at build time, served by the default
command; a flag vLLM does not take fails the build with vLLM's message."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from qa.common import ServedProcess
from qa.common.build_py import run_build_py
from qa.common.docker import docker
from qa.common.http_calls import fetch_json

pytestmark = pytest.mark.docker
READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "180"))
TAG = os.environ.get("TVB_IMAGE_TAG", "tritonserver-vllm:test") + "-served"


def build(tmp_path: Path, model: Path, args: str) -> subprocess.CompletedProcess:
    return run_build_py("--backend=vllm", "--endpoint=openai", f"--tag={TAG}", "-v",
                        f"--serve-model={model}", f"--serve-model-args={args}",
                        build_dir=tmp_path / "build")


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
    box = ServedProcess.container("the served model's image", TAG,
                                  ports={"http": 8000, "openai": 9000})
    try:
        box.wait_http("openai", "/v1/models", timeout=READY_TIMEOUT, interval=1)
        models = fetch_json(box.url("openai") + "/v1/models")
        assert [m["id"] for m in models["data"]] == ["my-llm"]
        config = fetch_json(box.url("http") + "/v2/models/my-llm/config")
        assert config["parameters"]["vllm_model"]["string_value"] == \
            f"/opt/models/{tiny_model.name}"
        answer = fetch_json(box.url("openai") + "/v1/completions",
                            {"model": "my-llm", "prompt": "Hello", "max_tokens": 4,
                             "temperature": 0})
        assert answer["usage"]["completion_tokens"] == 4
    finally:
        box.stop(timeout=0)  # checked already: no need to wait for a graceful exit
        docker("image", "rm", TAG, check=False)

"""The image's `serve` refusing bad input before anything starts: vLLM's own message for
a flag it does not know or a value it does not take, and a clear one for a path that is
no model folder.  (Serving a model with `serve` is the README's block, run by
test_readme_commands.py.)"""
from __future__ import annotations

import time

import pytest

from qa.common.figures import record
from qa.L0_image.conftest import docker

pytestmark = pytest.mark.docker
# vLLM's parser imports torch: seconds on an idle machine, more on a loaded one; far less
# than a start (the engine never starts).
REFUSED_WITHIN_S = 60


def serve(image: str, *args: str):
    started = time.monotonic()
    out = docker("run", "--rm", image, "serve", *args, check=False)
    return out, time.monotonic() - started


def test_an_invalid_vllm_flag_is_refused_with_vllms_message(image):
    out, seconds = serve(image, "/opt/models/tiny-llama", "--max-model-len", "2048",
                         "--no-such-flag")
    record("serve_refuses_a_bad_flag_s", round(seconds, 1), "s",
           "docker run IMAGE serve MODEL --no-such-flag to its exit")
    assert out.returncode == 2, out.stdout + out.stderr
    # argparse's message, from vLLM's parser: its usage line, then the error.
    assert out.stderr.strip().endswith(
        "serve: error: unrecognized arguments: --no-such-flag"), out.stderr
    assert "tritonserver" not in out.stdout + out.stderr.replace("tritonserver-vllm", "")
    assert seconds < REFUSED_WITHIN_S


def test_a_path_that_is_no_model_folder(image):
    out, _ = serve(image, "/opt/tritonserver", "--max-model-len", "2048")
    assert out.returncode == 2
    assert out.stderr.strip().endswith(
        "serve: error: /opt/tritonserver: not a model folder (no config.json or params.json "
        "in it)"), out.stderr

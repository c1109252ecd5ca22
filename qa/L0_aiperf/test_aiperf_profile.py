"""NVIDIA's load generator against the image's OpenAI endpoint: a short `aiperf profile`
(chat, streaming, fixed input and output token counts, 4 concurrent streams) must finish
every request without an error, each with exactly the tokens asked for; its throughput
and latencies go into the QA summary (qa/common/figures.py).

Runs against a container of $TVB_IMAGE (the image pass of scripts/run_tests.sh, and
`python -m qa IMAGE`): the image's own entrypoint starts tritonserver and the frontend.
aiperf runs on this host from its own venv ($TVB_AIPERF, made by scripts/setup_host.sh).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from qa.common import TritonServer, write_vllm_model
from qa.common.figures import record

from .profile import Profile, figures, pinned_version, problems, read_export

pytestmark = [
    pytest.mark.docker, pytest.mark.e2e,
    pytest.mark.skipif(not os.environ.get("TVB_IMAGE"),
                       reason="checks the image: runs in the image pass (TVB_IMAGE)"),
]

MODEL = "tiny"
AIPERF_TIMEOUT = 600


def aiperf_binary() -> str:
    aiperf = os.environ.get("TVB_AIPERF")
    if not aiperf or not os.access(aiperf, os.X_OK):
        pytest.fail(f"TVB_AIPERF={aiperf!r} is not an aiperf binary: "
                    "run `eval \"$(scripts/setup_host.sh)\"` first")
    return aiperf


def aiperf_env() -> dict[str, str]:
    env = dict(os.environ)
    # aiperf 0.13 in offline mode looks a tokenizer up in the hub's cache only, never as a
    # folder; a folder needs no network either way.
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    # The suites' PYTHONPATH (this checkout's packages) is not for aiperf's venv.
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture
def server(tmp_path, tiny_model):
    repo = tmp_path / "models"
    write_vllm_model(repo, MODEL, {"model": str(tiny_model), "max_model_len": 512, "seed": 0})
    with TritonServer(repo, mounts=[tiny_model]) as server:
        server.wait_openai()
        yield server


def test_aiperf_profile_of_streamed_chat_completions(server, tiny_model, tmp_path):
    profile = Profile(model=MODEL, url=server.openai_url, tokenizer=tiny_model)
    artifacts = tmp_path / "aiperf"
    argv = profile.argv(aiperf_binary(), artifacts)
    print("\n" + " ".join(argv))
    started = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=AIPERF_TIMEOUT,
                         env=aiperf_env(), cwd=tmp_path)
    took = time.monotonic() - started
    log = artifacts / "logs" / "aiperf.log"
    detail = (f"aiperf exited {out.returncode} after {took:.0f} s:\n{out.stdout[-4000:]}"
              f"{out.stderr[-4000:]}\n{log.read_text()[-4000:] if log.exists() else ''}")
    assert out.returncode == 0, detail
    export = read_export(artifacts)
    assert problems(export, profile) == [], detail
    assert export.get("aiperf_version") == pinned_version(), "the venv is not the pinned aiperf"
    print(f"aiperf {export['aiperf_version']}: {profile.requests} requests in {took:.0f} s")
    record("aiperf_version", export["aiperf_version"])
    for name, (value, unit) in figures(export).items():
        record(name, value, unit, f"aiperf, {profile.concurrency} streams, "
               f"{profile.input_tokens} in / {profile.output_tokens} out tokens")

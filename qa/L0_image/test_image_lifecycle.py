"""The container's life: start-up time to ready (measured, reported), and `docker stop`
while streams are in flight: every stream finishes or ends cleanly, tritonserver and the
frontend both exit within the grace period, and the container's exit status is 0."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from qa.common.figures import record
from qa.L0_image.conftest import READY_TIMEOUT, docker, serve
from tritonbuild.pipeline.components.sample_model import COMPILE_CACHE_DIR as SEED

pytestmark = pytest.mark.docker
GRACE_S = 30        # docker stop -t: SIGTERM, then SIGKILL after this many seconds
STREAM_TOKENS = 512


@pytest.fixture(scope="module")
def served(image):
    """One container for the module (a start costs ~45 s on 2 cores): its start-up is
    measured, then the SIGTERM test stops it."""
    served = serve(image)
    yield served
    docker("rm", "-f", served.cid, check=False)


def test_startup_to_ready(served):
    record("startup_to_ready_s", round(served.ready_after, 1), "s",
           "docker run to tritonserver's /v2/health/ready")
    record("startup_to_openai_s", round(served.openai_after, 1), "s",
           "docker run to the OpenAI frontend's /v1/models")
    assert 0 < served.ready_after <= served.openai_after < READY_TIMEOUT


def test_first_start_reads_the_compile_cache_made_at_build_time(served):
    # The image ships the sample model's compile cache, made by serving it at build time;
    # the entrypoint seeds the container's cache with it.  A start whose engine settings
    # differ from the build's would compile under another key: a second entry.
    if docker("exec", served.cid, "test", "-d", SEED, check=False).returncode != 0:
        pytest.skip(f"no {SEED} in the image (GPU images compile at their first start)")

    def entries(root: str) -> list[str]:
        return docker("exec", served.cid, "sh", "-c",
                      f"ls {root}/torch_compile_cache/*/").stdout.split()
    seeded = entries(SEED)
    assert seeded, f"{SEED} holds no compile cache"
    assert entries("$HOME/.cache/vllm") == seeded


def _stream(url: str, body: dict, first_event: threading.Event, outcome: dict) -> None:
    """Read one SSE stream to its end; record how it ended."""
    events = 0
    try:
        with httpx.stream("POST", url, json=body, timeout=GRACE_S + 30) as r:
            outcome["status"] = r.status_code
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                events += 1
                first_event.set()
                data = line[len("data: "):]
                if data == "[DONE]":
                    outcome.setdefault("end", "done")
                    continue
                payload = json.loads(data)
                if "error" in payload:
                    outcome["end"] = "error event: " + str(payload["error"])[:200]
                    continue
                reasons = [c.get("finish_reason") for c in payload.get("choices", [])]
                triton_reason = payload.get("finish_reason")  # Triton's generate_stream
                reasons += triton_reason if isinstance(triton_reason, list) else [triton_reason]
                if any(reasons):
                    outcome.setdefault("end", "finished: " + ",".join(r for r in reasons if r))
        outcome.setdefault("end", "closed after the last event")
    except httpx.HTTPError as e:
        outcome["end"] = f"cut: {type(e).__name__}: {e}"
    finally:
        outcome["events"] = events
        first_event.set()


def test_sigterm_with_streams_in_flight(served):
    requests = [
        (f"http://127.0.0.1:{served.openai}/v1/chat/completions",
         {"model": "vllm_model", "stream": True, "max_tokens": STREAM_TOKENS,
          "messages": [{"role": "user", "content": "Tell me a long story."}]}),
        (f"http://127.0.0.1:{served.openai}/v1/completions",
         {"model": "vllm_model", "stream": True, "max_tokens": STREAM_TOKENS,
          "prompt": "Once upon a time"}),
        (f"http://127.0.0.1:{served.http}/v2/models/vllm_model/generate_stream",
         {"text_input": "Once upon a time", "stream": True, "return_finish_reason": True,
          "parameters": {"max_tokens": STREAM_TOKENS}}),
    ]
    outcomes = [{} for _ in requests]
    started = [threading.Event() for _ in requests]
    threads = [threading.Thread(target=_stream, args=(url, body, ev, out), daemon=True)
               for (url, body), ev, out in zip(requests, started, outcomes, strict=True)]
    for t in threads:
        t.start()
    for ev in started:
        assert ev.wait(60), "a stream sent nothing in 60 s"
    assert all(o.get("events", 1) > 0 or "end" not in o for o in outcomes), outcomes
    t0 = time.monotonic()
    docker("stop", "-t", str(GRACE_S), served.cid, timeout=GRACE_S + 60)
    stop_s = time.monotonic() - t0
    for t in threads:
        t.join(30)
    state = json.loads(docker("inspect", "-f", "{{json .State}}", served.cid).stdout)
    logs = served.logs()
    record("sigterm_to_exit_s", round(stop_s, 1), "s", "docker stop with 3 streams in flight")
    record("sigterm_stream_ends", "; ".join(f"{o['end']} ({o['events']} events)"
                                            for o in outcomes))
    assert stop_s < GRACE_S, f"not stopped within the {GRACE_S} s grace period:\n{logs}"
    assert not any(o["end"].startswith("cut") for o in outcomes), (outcomes, logs)
    assert all(o.get("status") == 200 for o in outcomes), outcomes
    assert state["ExitCode"] == 0, f"exit status {state['ExitCode']}:\n{logs}"
    assert not state["OOMKilled"]

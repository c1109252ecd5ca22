"""Two tritonservers on one host, each with a shared-memory prefix of its own for the
Python backend (`--backend-config=python,shm-region-prefix-name=...`): both load the vLLM
model and serve.  On the host both share /dev/shm, where each one's regions carry its
prefix; in container mode each container has its own /dev/shm, and both still serve."""
from __future__ import annotations

import os
from contextlib import ExitStack

import httpx

from qa.common import TritonServer, write_vllm_model

from .vllm_suite import MODEL, engine_args


def test_two_servers_with_their_own_shm_prefix(tiny_model, tmp_path):
    repo = tmp_path / "repository"
    write_vllm_model(repo, MODEL, engine_args(tiny_model))
    prefixes = [f"tvb_{os.getpid()}_{name}_" for name in ("a", "b")]
    with ExitStack() as stack:
        # Started together: they load side by side, as two servers on one host do.
        servers = [stack.enter_context(TritonServer(
            repo, mounts=[tiny_model], wait=False,
            server_args=[f"--backend-config=python,shm-region-prefix-name={prefix}"]))
            for prefix in prefixes]
        for server in servers:
            server.wait()
        first = servers[0]
        for server in servers:
            answer = httpx.post(f"{server.http_url}/v2/models/{MODEL}/generate",
                                json={"text_input": "Hello", "parameters": {"max_tokens": 4}},
                                timeout=120)
            assert answer.status_code == 200, answer.text
            assert answer.json()["text_output"]
        if first.image is None:
            regions = os.listdir("/dev/shm")
            for prefix in prefixes:
                assert any(r.startswith(prefix) for r in regions), (prefix, regions)

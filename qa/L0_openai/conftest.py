"""One real stack for the whole suite: tritonserver + vLLM backend + the tiny model, and
the frontend as a server process (or, with TVB_IMAGE set, the frontend inside the image).

TVB_OPENAI_TRANSPORT picks how a frontend started here reaches Triton: `grpc` (KServe
gRPC, the default) or `http` (Triton's generate_stream).  The image's own frontend uses
HTTP, so CI's image pass covers that one.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from triton_vllm_backend.stub.wire import LORA_NAMES_PARAMETER as PUBLISHED_NAMES

from qa.common import TritonServer, make_tiny_lora, write_vllm_model

from .frontend_process import FrontendProcess

MODEL = "tiny"
LORA = "sql"  # the LoRA adapter MODEL serves, listed as "tiny:sql"
EMBED_MODEL = "tiny_embed"
TRANSPORT = os.environ.get("TVB_OPENAI_TRANSPORT", "grpc")
if TRANSPORT not in ("grpc", "http"):
    raise ValueError(f"TVB_OPENAI_TRANSPORT must be grpc or http, not {TRANSPORT!r}")
MAX_MODEL_LEN = 1024


@dataclass
class Stack:
    triton: TritonServer
    url: str  # the frontend's base URL, without /v1
    tokenizer_path: Path
    frontend: FrontendProcess | None


def write_repository(root: Path, tiny_model: Path) -> Path:
    repo = root / "models"
    write_vllm_model(repo, MODEL, {
        "model": str(tiny_model), "max_model_len": MAX_MODEL_LEN, "seed": 0,
        # vLLM's statistics feed the vllm: metrics that show a request was freed.
        "disable_log_stats": False,
        # vLLM logs each request it adds, by an id that starts with the Triton request id.
        "enable_log_requests": True,
        # Compact JSON under structured outputs: free whitespace lets a random model pad
        # an answer with newlines until max_tokens, and then it does not parse.
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        "enable_lora": True, "max_lora_rank": 8, "max_loras": 1,
        # Requests may carry a priority (the OpenAI frontend's `priority`).
        "scheduling_policy": "priority",
    }, parameters={"REPORT_CUSTOM_METRICS": "true", PUBLISHED_NAMES: LORA},
       # Relative to the version folder, so that the repository works mounted in a container.
       files={"multi_lora.json": json.dumps({LORA: f"./{LORA}-adapter"})})
    make_tiny_lora(repo / MODEL / "1" / f"{LORA}-adapter")
    write_vllm_model(repo, EMBED_MODEL, {
        "model": str(tiny_model), "runner": "pooling", "max_model_len": 256,
    })
    return repo


if __name__ == "__main__":
    # Write the suite's model repository into DIR:
    #     PYTHONPATH=backends/vllm python -m qa.L0_openai.conftest DIR
    from qa.common import tiny_model_path

    print(write_repository(Path(sys.argv[1]), tiny_model_path()))


@dataclass
class RunningTriton:
    """A tritonserver started outside the suite
    (TVB_OPENAI_TRITON=GRPC_HOST:PORT,METRICS_URL[,HTTP_URL])."""
    grpc_url: str
    metrics_url: str
    http_url: str = ""
    openai_url: str | None = None


def triton_url(triton) -> str:
    """The --triton-url of a frontend started by the suite, for TVB_OPENAI_TRANSPORT."""
    return triton.http_url if TRANSPORT == "http" else triton.grpc_url


@contextmanager
def _triton(tmp_path_factory, tiny_model):
    external = os.environ.get("TVB_OPENAI_TRITON")
    if external:
        # Serving write_repository()'s models; lets one iterate without a restart per run.
        yield RunningTriton(*external.split(","))
        return
    repo = write_repository(tmp_path_factory.mktemp("openai"), tiny_model)
    with TritonServer(repo, mounts=[tiny_model]) as triton:
        yield triton


@pytest.fixture(scope="package")
def stack(tmp_path_factory, tiny_model) -> Stack:
    # Package scope: one tritonserver for the suite, stopped before other suites start theirs.
    with _triton(tmp_path_factory, tiny_model) as triton:
        if triton.openai_url:  # the image runs its own frontend
            yield Stack(triton, triton.openai_url, tiny_model, None)
            return
        # No --tokenizer: the frontend finds the model folder through `vllm_model`.
        with FrontendProcess(triton_url(triton), metrics_url=triton.metrics_url) as fe:
            yield Stack(triton, fe.url, tiny_model, fe)


@pytest.fixture(scope="package")
def tokenizer(stack):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(stack.tokenizer_path), local_files_only=True)


@pytest.fixture(scope="package")
def oai(stack):
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0,
                           timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="package")
def http(stack):
    import httpx

    with httpx.Client(base_url=stack.url, timeout=120) as client:
        yield client

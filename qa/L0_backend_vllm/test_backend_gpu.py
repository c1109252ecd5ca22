"""What only a GPU shows: each KIND_GPU instance on its own device, tensor parallelism
from model.json, and a small GPU memory share letting two engines share a server.
Marked `gpu` (left out by the default command); run on a GPU machine against the GPU
image: `TVB_IMAGE=<gpu image> scripts/run_tests.sh -m gpu qa/L0_backend_vllm`."""

from __future__ import annotations

import subprocess

import pytest

from qa.common import TritonServer, write_vllm_model
from qa.common.models import gpu_count

from .vllm_suite import PROMPTS, engine_args, generate, generate_stream

pytestmark = [pytest.mark.gpu, pytest.mark.e2e, pytest.mark.timeout(900)]


def gpus_with_compute_processes() -> set[str]:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True)
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def gpus():
    count = gpu_count()
    if count == 0:
        pytest.skip("no NVIDIA GPU on this machine")
    return count


def test_kind_gpu_instances_each_take_their_own_gpu(gpus, tiny_model, tmp_path):
    # KIND_GPU with no `gpus` list: Triton makes one instance per GPU.
    write_vllm_model(tmp_path, "tiny_gpu", engine_args(tiny_model), kind="KIND_GPU")
    write_vllm_model(tmp_path, "tiny_second", engine_args(tiny_model))  # shares the GPUs
    with TritonServer(tmp_path, mounts=[tiny_model]) as server:
        for model in ("tiny_gpu", "tiny_second"):
            response = generate(server, model, PROMPTS[0], {"max_tokens": 8, "temperature": 0})
            assert response.status_code == 200, response.text
        events = generate_stream(server, "tiny_gpu", PROMPTS[1], {"max_tokens": 8})
        assert events and events[-1].get("finish_reason") in ("length", "stop", None)
        if gpus >= 2:
            assert len(gpus_with_compute_processes()) >= 2, server.log_tail()


def test_tensor_parallel_from_model_json(gpus, tiny_model, tmp_path):
    if gpus < 2:
        pytest.skip("tensor parallelism needs two GPUs")
    # The tiny model has 2 attention heads: it splits over 2 GPUs.
    write_vllm_model(tmp_path, "tiny_tp", {**engine_args(tiny_model), "tensor_parallel_size": 2})
    with TritonServer(tmp_path, mounts=[tiny_model]) as server:
        response = generate(server, "tiny_tp", PROMPTS[0], {"max_tokens": 8, "temperature": 0})
        assert response.status_code == 200, response.text

"""Helpers shared by the end-to-end suites under qa/.

- `TritonServer` starts a real tritonserver (on this host, or in a container of the image
  named by `TVB_IMAGE`) on free loopback ports.
- `ServedProcess` starts any other server (a host process or a container of an image),
  waits for it, keeps its log and stops it; `wait_until()` waits for anything else.
- `tiny_model_path()` makes the tiny test model once and caches it.
- `write_model_repository()` lays out a model repository for the vLLM backend;
  `make_tiny_lora()` makes a LoRA adapter for the tiny model.
- Modules of their own: `qa.common.docker` runs the docker client (every container gets
  the least CPU weight), `qa.common.build_py` runs ./build.py, and
  `qa.common.http_calls` asks a server one small HTTP question (a status, a JSON answer).

pytest's `pythonpath` setting puts the repository root on `sys.path`, so tests import these as
`from qa.common import TritonServer`.
"""

from qa.common.metrics import series_total, settled
from qa.common.models import (
    make_tiny_lora,
    tiny_model_path,
    write_model_repository,
    write_vllm_model,
)
from qa.common.served import ServedProcess, ServerError, free_port, wait_until
from qa.common.tritonserver import TritonServer

__all__ = [
    "ServedProcess",
    "ServerError",
    "TritonServer",
    "free_port",
    "make_tiny_lora",
    "series_total",
    "settled",
    "tiny_model_path",
    "wait_until",
    "write_model_repository",
    "write_vllm_model",
]

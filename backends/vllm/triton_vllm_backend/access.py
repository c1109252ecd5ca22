"""The keys that the image's tritonserver asks for, and where a process beside it finds them.

The image's entrypoint restricts Triton's model-repository API (index, load, unload; with
shared memory, trace and logging) to requests that carry the header
`triton-model-control-key: KEY`, KEY from $TRITON_MODEL_CONTROL_KEY (random unless set), and,
when $TRITON_OPENAI_API_KEY is set, KServe inference (generate, the model watch's health
check among them) to `authorization: Bearer API_KEY`.

The processes the entrypoint starts get both in their environment.  A command run beside
them later (a liveness probe: `python3 -m triton_vllm_backend.watch --once`) gets the
container's environment, which holds the model-control key only where it was set (the Helm
chart sets it from a Secret); otherwise it reads the file the entrypoint wrote, readable by
the container's user alone.

Only the standard library: the watch imports it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MODEL_CONTROL_KEY_ENV = "TRITON_MODEL_CONTROL_KEY"
MODEL_CONTROL_KEY_FILE_ENV = "TRITON_MODEL_CONTROL_KEY_FILE"
# The entrypoint's default (dockerfiles/image/entrypoint.sh.j2).
DEFAULT_MODEL_CONTROL_KEY_FILE = "/tmp/triton-vllm/model-control-key"
MODEL_CONTROL_HEADER = "triton-model-control-key"
API_KEY_ENV = "TRITON_OPENAI_API_KEY"


@dataclass(frozen=True)
class Keys:
    model_control: str | None = None
    api_key: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Keys:
        return cls(_model_control_key(environ), environ.get(API_KEY_ENV) or None)

    def repository_headers(self) -> dict[str, str]:
        """Headers of a request to the model-repository API."""
        return {MODEL_CONTROL_HEADER: self.model_control} if self.model_control else {}

    def inference_headers(self) -> dict[str, str]:
        """Headers of an inference request (generate, generate_stream, infer)."""
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def _model_control_key(environ: Mapping[str, str]) -> str | None:
    if environ.get(MODEL_CONTROL_KEY_ENV):
        return environ[MODEL_CONTROL_KEY_ENV]
    path = Path(environ.get(MODEL_CONTROL_KEY_FILE_ENV) or DEFAULT_MODEL_CONTROL_KEY_FILE)
    try:
        return path.read_text().strip() or None
    except OSError:  # no such file: a tritonserver that asks for no key
        return None

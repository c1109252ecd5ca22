"""The keys a tritonserver with restricted APIs asks for (the image's does), sent by the
HTTP and gRPC clients.

- The model-repository API (the catalog's repository index) asks for the header
  `triton-model-control-key: KEY`, KEY from $TRITON_MODEL_CONTROL_KEY: the image's
  entrypoint makes one at start and hands it to the frontend it starts; a frontend of its
  own (the Helm chart's frontend Deployment) gets it from the same Secret as the server.
- KServe inference (generate_stream, the health check's generate, ModelStreamInfer) asks
  for `authorization: Bearer KEY` when the image runs with $TRITON_OPENAI_API_KEY: the
  frontend sends its own API key, the same one.

Over gRPC, Triton reads restricted-API keys from metadata named `triton-grpc-protocol-`
and the header's name.  The image's model watch sends the same
(backends/vllm/triton_vllm_backend/access.py; tests/frontends/openai/test_triton_credentials.py
checks that both agree, with each other and with the image's restrictions).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

MODEL_CONTROL_KEY_ENV = "TRITON_MODEL_CONTROL_KEY"
MODEL_CONTROL_HEADER = "triton-model-control-key"
AUTHORIZATION_HEADER = "authorization"
# Triton's prefix of a restricted API's key in gRPC metadata.
GRPC_PREFIX = "triton-grpc-protocol-"

Headers = tuple[tuple[str, str], ...]


class CredentialsError(ValueError):
    pass


def _checked(name: str, value: str | None) -> str | None:
    """A key that travels in a header: visible ASCII and inner spaces only (a line break
    would end the header, and gRPC refuses anything else)."""
    if value and not (value.isascii() and value.isprintable() and value.strip() == value):
        raise CredentialsError(f"{name} must be printable ASCII without leading or trailing "
                               f"spaces: Triton compares it as a header value")
    return value or None


@dataclass(frozen=True)
class TritonCredentials:
    model_control_key: str | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        _checked(f"${MODEL_CONTROL_KEY_ENV}", self.model_control_key)
        _checked("the API key", self.api_key)

    @classmethod
    def from_environment(cls, api_key: str | None,
                         environ: Mapping[str, str] = os.environ) -> TritonCredentials:
        """The model-control key from the environment, beside the frontend's API key."""
        return cls(environ.get(MODEL_CONTROL_KEY_ENV) or None, api_key or None)

    def repository_headers(self) -> Headers:
        return ((MODEL_CONTROL_HEADER, self.model_control_key),) if self.model_control_key else ()

    def inference_headers(self) -> Headers:
        return ((AUTHORIZATION_HEADER, f"Bearer {self.api_key}"),) if self.api_key else ()


def grpc_metadata(headers: Headers) -> Headers:
    """The gRPC metadata that carries these headers to a restricted API."""
    return tuple((GRPC_PREFIX + name, value) for name, value in headers)

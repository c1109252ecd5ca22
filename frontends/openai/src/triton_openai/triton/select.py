"""Choose the Triton client for the deployment."""

from __future__ import annotations

from .client import TritonClient
from .credentials import TritonCredentials


class ClientSelectionError(ValueError):
    pass


def choose_client_kind(triton_url: str | None) -> str:
    """Return "grpc" or "http": the URL's scheme picks the transport, `http://` for
    Triton's HTTP endpoint (generate_stream), `grpc://` or none for KServe gRPC."""
    if not triton_url:
        raise ClientSelectionError("give --triton-url HOST:PORT (Triton's KServe gRPC endpoint) "
                                   "or http://HOST:PORT (its HTTP endpoint)")
    scheme, sep, _ = triton_url.partition("://")
    if not sep or scheme == "grpc":
        return "grpc"
    if scheme == "http":
        return "http"
    raise ClientSelectionError(f"--triton-url {triton_url!r}: the scheme must be grpc:// "
                               f"or http:// (https is not supported)")


def create_client(triton_url: str | None, in_process=None,
                  api_key: str | None = None) -> TritonClient:
    """The client for `triton_url`, or a Triton in this process (`in_process`, its
    ServerSettings).  A remote Triton's restricted APIs get the model-control key from
    $TRITON_MODEL_CONTROL_KEY and `api_key`, the frontend's own (credentials.py)."""
    if in_process is not None:
        from .inprocess_client import InProcessTritonClient

        return InProcessTritonClient(in_process)
    kind = choose_client_kind(triton_url)
    credentials = TritonCredentials.from_environment(api_key)
    if kind == "http":
        from .http_client import HttpTritonClient

        return HttpTritonClient(triton_url, credentials)
    from .grpc_client import GrpcTritonClient

    return GrpcTritonClient(triton_url.removeprefix("grpc://"), credentials)

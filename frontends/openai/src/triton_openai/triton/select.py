"""Choose the Triton client for the deployment."""

from __future__ import annotations

from .client import TritonClient
from .inprocess import bindings_available


class ClientSelectionError(ValueError):
    pass


def choose_client_kind(triton_url: str | None, model_repository: str | None,
                       in_process: bool, have_bindings: bool) -> str:
    """Return "grpc", "http" or "inprocess".

    In-process serving is used only when asked for (a model repository given and
    --in-process set).  Otherwise the URL's scheme picks the transport: `http://` for
    Triton's HTTP endpoint (generate_stream), `grpc://` or none for KServe gRPC.  Both
    let the frontend run apart from the server and work without the NGC-only bindings.
    """
    if in_process:
        if not have_bindings:
            raise ClientSelectionError(
                "--in-process needs Triton's `tritonserver` Python bindings and "
                "libtritonserver.so, which are not importable here; use --triton-url instead")
        if not model_repository:
            raise ClientSelectionError("--in-process needs --model-repository")
        return "inprocess"
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


def create_client(triton_url: str | None, model_repository: str | None = None,
                  in_process: bool = False) -> TritonClient:
    kind = choose_client_kind(triton_url, model_repository, in_process,
                              bindings_available() if in_process else False)
    if kind == "inprocess":
        from .inprocess import InProcessTritonClient

        return InProcessTritonClient(model_repository)
    if kind == "http":
        from .http_client import HttpTritonClient

        return HttpTritonClient(triton_url)
    from .grpc_client import GrpcTritonClient

    return GrpcTritonClient(triton_url.removeprefix("grpc://"))

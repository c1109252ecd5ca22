"""Choose the Triton client for the deployment."""

from __future__ import annotations

from .client import TritonClient
from .inprocess import bindings_available


class ClientSelectionError(ValueError):
    pass


def choose_client_kind(triton_url: str | None, model_repository: str | None,
                       in_process: bool, have_bindings: bool) -> str:
    """Return "grpc" or "inprocess".

    In-process serving is used only when asked for (a model repository given and
    --in-process set); gRPC otherwise, because it lets the frontend run apart from
    the server and works without the NGC-only bindings.
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
        raise ClientSelectionError("give --triton-url HOST:PORT (Triton's KServe gRPC endpoint)")
    return "grpc"


def create_client(triton_url: str | None, model_repository: str | None = None,
                  in_process: bool = False) -> TritonClient:
    kind = choose_client_kind(triton_url, model_repository, in_process,
                              bindings_available() if in_process else False)
    if kind == "inprocess":
        from .inprocess import InProcessTritonClient

        return InProcessTritonClient(model_repository)
    from .grpc_client import GrpcTritonClient

    url = triton_url
    for prefix in ("grpc://", "http://"):
        if url.startswith(prefix):
            url = url[len(prefix):]
    return GrpcTritonClient(url)

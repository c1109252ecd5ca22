"""How the frontend talks to Triton.

Everything above this package sees one narrow interface, :class:`TritonClient`
(`client.py`): server readiness, the model index with each model's config
parameters, and one streaming inference call.  Two implementations exist: KServe
gRPC to a tritonserver anywhere (`grpc_client.py`, the default) and Triton's HTTP
generate_stream (`http_client.py`, cheaper per streamed token).
`vllm_io.py` turns generation requests into the vLLM backend's tensors and back.
"""

from .client import InferResponse, ModelInfo, Tensor, TritonClient, TritonError
from .select import create_client

__all__ = ["InferResponse", "ModelInfo", "Tensor", "TritonClient", "TritonError", "create_client"]

"""Triton's in-process Python bindings (`tritonserver` package) behind the same interface.

The bindings need `libtritonserver.so` from an NGC image; they are imported lazily so
that the frontend works everywhere else over gRPC.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from .client import InferResponse, ModelInfo, Tensor, TritonError, model_error


def bindings_available() -> bool:
    try:
        import tritonserver  # noqa: F401
    except Exception:  # ImportError, or a missing shared library at import time
        return False
    return True


class InProcessTritonClient:
    def __init__(self, model_repository: str):
        import numpy as np
        import tritonserver

        self._np = np
        self._tritonserver = tritonserver
        self._server = tritonserver.Server(
            model_repository=model_repository, log_error=True).start(wait_until_ready=False)

    async def server_ready(self) -> bool:
        return bool(self._server.ready())

    async def list_models(self) -> list[ModelInfo]:
        models = []
        for (name, version), state in self._server.models().items():
            ready = state.get("state") == "READY" if isinstance(state, dict) else bool(state)
            params = {}
            if ready:
                config = self._server.model(name).config()
                params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
            models.append(ModelInfo(name, str(version), ready, params, ""))
        return models

    async def stream_infer(
        self, model: str, inputs: list[Tensor], outputs: list[str], request_id: str
    ) -> AsyncIterator[InferResponse]:
        np = self._np
        arrays = {}
        for t in inputs:
            if t.datatype == "BYTES":
                from .client import deserialize_bytes

                arrays[t.name] = np.array(deserialize_bytes(t.data), dtype=np.object_).reshape(t.shape)
            else:
                dtype = {"BOOL": np.bool_, "INT64": np.int64, "FP32": np.float32}[t.datatype]
                arrays[t.name] = np.frombuffer(t.data, dtype=dtype).reshape(t.shape)
        try:
            responses = self._server.model(model).async_infer(
                inputs=arrays, request_id=request_id, output_names=outputs)
        except self._tritonserver.InvalidArgumentError as err:
            raise TritonError(str(err), 400) from None
        try:
            async for response in responses:
                if response.error is not None:
                    raise model_error(str(response.error), 400)
                out = {}
                for name, value in response.outputs.items():
                    arr = np.from_dlpack(value) if not hasattr(value, "to_bytes_array") else None
                    if arr is None:
                        from .client import serialize_bytes

                        items = value.to_bytes_array().reshape(-1).tolist()
                        out[name] = Tensor(name, "BYTES", (len(items),), serialize_bytes(items))
                    else:
                        dt = {"bool": "BOOL", "int64": "INT64", "int32": "INT32",
                              "float32": "FP32"}[str(arr.dtype)]
                        out[name] = Tensor(name, dt, tuple(arr.shape), arr.tobytes())
                yield InferResponse(out, bool(response.final))
                if response.final:
                    return
        finally:
            if hasattr(responses, "cancel"):
                responses.cancel()

    async def close(self) -> None:
        await asyncio.to_thread(self._server.stop)

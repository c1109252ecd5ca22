"""KServe gRPC client over one shared `grpc.aio` channel.

Why not `tritonclient.grpc.aio.InferenceServerClient.stream_infer`: it wraps each
response in an InferResult (numpy conversions per token) and hides the call object
that cancels the stream.  Using the generated stubs directly keeps per-token work to a
protobuf parse and lets a client disconnect cancel the Triton request at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from .client import (
    ABORT_TIMEOUT_S,
    AbortTasks,
    InferResponse,
    ModelInfo,
    Tensor,
    TritonError,
    model_error,
)
from .credentials import TritonCredentials, grpc_metadata
from .vllm_contract import ABORT_PARAMETER, HEALTH_PARAMETER

log = logging.getLogger("triton_openai.triton")

# Unlimited message sizes: long prompts and embeddings exceed gRPC's 4 MiB default.
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_time_ms", 30_000),
]

# gRPC status codes that mean the request itself was wrong.
_CLIENT_CODES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}
_UNAVAILABLE_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
# How Triton refuses a call of a restricted API without the key it asks for (as UNAVAILABLE).
_REFUSED_KEY = "This protocol is restricted"


def _rpc_error(err: grpc.RpcError) -> TritonError:
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    if (details or "").startswith(_REFUSED_KEY):  # a fault of the deployment's, not transient
        return TritonError(details, 500)
    return model_error(details or "", 503 if code in _UNAVAILABLE_CODES
                       else 400 if code in _CLIENT_CODES else 500)


def _is_final(infer_response) -> bool:
    """Whether Triton flagged this as the request's last response."""
    final = infer_response.parameters.get("triton_final_response")
    return final is not None and final.bool_param


class GrpcTritonClient:
    carries_feeds = True

    def __init__(self, url: str, credentials: TritonCredentials | None = None):
        self.url = url
        credentials = credentials or TritonCredentials()
        self._repository_metadata = grpc_metadata(credentials.repository_headers())
        self._inference_metadata = grpc_metadata(credentials.inference_headers())
        self._channel: grpc.aio.Channel | None = None
        self._stub_: service_pb2_grpc.GRPCInferenceServiceStub | None = None
        self._aborts = AbortTasks()

    @property
    def _stub(self) -> service_pb2_grpc.GRPCInferenceServiceStub:
        # Made on first use: a grpc.aio channel belongs to the event loop that is running
        # when it is created, which is uvicorn's, not the one (if any) of build_app().
        if self._stub_ is None:
            self._channel = grpc.aio.insecure_channel(self.url, options=_CHANNEL_OPTIONS)
            self._stub_ = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        return self._stub_

    async def server_ready(self) -> bool:
        try:
            reply = await self._stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=2)
            return bool(reply.ready)
        except grpc.RpcError:
            return False

    async def list_models(self) -> list[ModelInfo]:
        try:
            index = await self._stub.RepositoryIndex(
                service_pb2.RepositoryIndexRequest(ready=False), timeout=5,
                metadata=self._repository_metadata)
            models = []
            for entry in index.models:
                ready = entry.state == "READY"
                params: dict[str, str] = {}
                backend, outputs = "", ()
                if ready:
                    cfg = await self._stub.ModelConfig(
                        service_pb2.ModelConfigRequest(name=entry.name), timeout=5)
                    params = {k: v.string_value for k, v in cfg.config.parameters.items()}
                    backend = cfg.config.backend
                    outputs = tuple(o.name for o in cfg.config.output)
                models.append(ModelInfo(entry.name, entry.version or "", ready, params, backend,
                                        outputs))
            return models
        except grpc.RpcError as err:
            raise _rpc_error(err) from None

    async def stream_infer(
        self, model: str, inputs: list[Tensor], outputs: list[str], request_id: str,
        parameters: dict[str, str] | None = None,
    ) -> AsyncIterator[InferResponse]:
        request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
        for name, value in (parameters or {}).items():
            request.parameters[name].string_param = value
        # Ask Triton to flag the last response, even when the model sends it empty.
        request.parameters["triton_enable_empty_final_response"].bool_param = True
        for tensor in inputs:
            t = request.inputs.add()
            t.name, t.datatype = tensor.name, tensor.datatype
            t.shape.extend(tensor.shape)
            request.raw_input_contents.append(tensor.data)
        for name in outputs:
            request.outputs.add().name = name

        call = self._stub.ModelStreamInfer(iter((request,)), metadata=self._inference_metadata)
        ended = False  # the server ended the request: final response, or an error
        try:
            async for reply in call:
                if reply.error_message:
                    ended = True
                    raise model_error(reply.error_message)
                resp = reply.infer_response
                out = {}
                for i, tensor in enumerate(resp.outputs):
                    out[tensor.name] = Tensor(
                        tensor.name, tensor.datatype, tuple(tensor.shape),
                        resp.raw_output_contents[i] if i < len(resp.raw_output_contents) else b"")
                final = _is_final(resp)
                if final:
                    ended = True
                yield InferResponse(out, final)
                if final:
                    return
        except grpc.RpcError as err:
            ended = True
            raise _rpc_error(err) from None
        finally:
            # Ends the gRPC stream whether the caller finished, failed or went away;
            # Triton then cancels the request and the backend aborts it in vLLM.
            if not call.done():
                call.cancel()
                log.debug("request %s: gRPC stream cancelled", request_id)
            if not ended:
                # Say so explicitly too: the stream's reset may not reach Triton (a
                # proxy in between), and the backend stops the request either way.
                self._aborts.start(self._abort(model, request_id))

    async def _abort(self, model: str, request_id: str) -> None:
        request = service_pb2.ModelInferRequest(model_name=model, id=f"{request_id}:abort")
        request.parameters[ABORT_PARAMETER].string_param = request_id
        # The backend answers with an empty final response; Triton sends it only if asked.
        request.parameters["triton_enable_empty_final_response"].bool_param = True
        try:
            call = self._stub.ModelStreamInfer(iter((request,)), timeout=ABORT_TIMEOUT_S,
                                               metadata=self._inference_metadata)
            async for reply in call:
                if reply.error_message:
                    # e.g. a model that is not the vLLM backend's: nothing to stop there.
                    log.debug("request %s: abort refused: %s", request_id, reply.error_message)
                if reply.error_message or _is_final(reply.infer_response):
                    break
            call.cancel()
        except grpc.RpcError as err:
            log.debug("request %s: abort failed: %s", request_id, err)

    async def model_health(self, model: str) -> None:
        request = service_pb2.ModelInferRequest(model_name=model, id="health-check")
        request.parameters[HEALTH_PARAMETER].bool_param = True
        # A model that can serve answers with an empty final response (as to an abort).
        request.parameters["triton_enable_empty_final_response"].bool_param = True
        call = self._stub.ModelStreamInfer(iter((request,)), metadata=self._inference_metadata)
        try:
            async for reply in call:
                if reply.error_message:
                    raise model_error(reply.error_message)
                if _is_final(reply.infer_response):
                    return
        except grpc.RpcError as err:
            raise _rpc_error(err) from None
        finally:
            if not call.done():
                call.cancel()  # answered, or the caller gave up waiting
        raise TritonError("Triton ended the health check without an answer", 500)

    async def close(self) -> None:
        await self._aborts.wait()
        if self._channel is not None:
            await self._channel.close()

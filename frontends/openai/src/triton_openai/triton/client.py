"""The narrow interface between the HTTP layer and a Triton server.

Tensors travel as raw little-endian bytes (KServe's raw contents), so that an
implementation never has to go through numpy for the tiny per-token responses
that dominate streaming.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import vllm_contract as wire

ABORT_TIMEOUT_S = 10.0


class TritonError(Exception):
    """Triton answered a request with an error, or could not be reached.

    `status` is the HTTP status the frontend should report (400 for errors Triton
    blames on the request, 503 when the server is unreachable, 500 otherwise).  `kind`
    is the vLLM backend's kind of the error (vllm_contract.py), None for any other.
    """

    def __init__(self, message: str, status: int = 500, kind: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str  # KServe type name: BYTES, BOOL, INT64, FP32, ...
    shape: tuple[int, ...]
    data: bytes  # raw little-endian contents

    # --- constructors for the few kinds the vLLM backend takes -------------------
    @staticmethod
    def bytes_(name: str, values: Sequence[bytes | str]) -> Tensor:
        return Tensor(name, "BYTES", (len(values),), serialize_bytes(values))

    @staticmethod
    def bool_(name: str, value: bool) -> Tensor:
        return Tensor(name, "BOOL", (1,), b"\x01" if value else b"\x00")

    @staticmethod
    def int64s(name: str, values: Sequence[int]) -> Tensor:
        return Tensor(name, "INT64", (len(values),), struct.pack(f"<{len(values)}q", *values))

    # --- decoders -------------------------------------------------------------
    def as_strings(self) -> list[str]:
        if self.shape == (1,):
            # The common case while streaming one choice: skip the generic walk.
            return [self.data[4:].decode("utf-8", errors="replace")]
        return [b.decode("utf-8", errors="replace") for b in deserialize_bytes(self.data)]

    def as_list(self) -> list:
        """Numbers of any supported type, or strings for BYTES."""
        if self.datatype == "BYTES":
            return self.as_strings()
        if self.shape == (1,) and self.datatype in _INT_SIZES:
            return [int.from_bytes(self.data, "little", signed=self.datatype[0] == "I")]
        fmt = _STRUCT_FORMATS[self.datatype]
        count = len(self.data) // struct.calcsize(fmt)
        values = list(struct.unpack(f"<{count}{fmt}", self.data))
        if self.datatype == "BOOL":
            values = [bool(v) for v in values]
        return values


_INT_SIZES = {"INT32", "UINT32", "INT64", "UINT64"}

_STRUCT_FORMATS = {
    "BOOL": "B", "INT8": "b", "UINT8": "B", "INT16": "h", "UINT16": "H",
    "INT32": "i", "UINT32": "I", "INT64": "q", "UINT64": "Q",
    "FP32": "f", "FP64": "d",
}


def serialize_bytes(values: Sequence[bytes | str]) -> bytes:
    """KServe BYTES layout: each element as a 4-byte little-endian length, then the bytes."""
    parts = []
    for value in values:
        b = value.encode("utf-8") if isinstance(value, str) else value
        parts.append(struct.pack("<I", len(b)))
        parts.append(b)
    return b"".join(parts)


def deserialize_bytes(data: bytes) -> list[bytes]:
    out, offset, end = [], 0, len(data)
    while offset < end:
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        out.append(data[offset:offset + length])
        offset += length
    return out


class Values:
    """An output that arrived already decoded (JSON), with the same readers as Tensor."""

    __slots__ = ("values",)

    def __init__(self, value: Any):
        self.values = value if isinstance(value, list) else [value]

    def as_strings(self) -> list[str]:
        return [v if isinstance(v, str) else str(v) for v in self.values]

    def as_list(self) -> list:
        return self.values


@dataclass
class InferResponse:
    outputs: dict[str, Tensor | Values] = field(default_factory=dict)
    final: bool = False
    # Another response of the same request has already arrived: a consumer that is
    # behind may merge this one with it instead of handling each on its own.
    more: bool = False


# The HTTP status of each kind of error the vLLM backend sends (vllm_contract.py); the
# OpenAI error's type and code follow from the status (errors.py).
KIND_STATUS = {wire.INVALID_ARGUMENT: 400, wire.UNAVAILABLE: 503, wire.ENGINE_DEAD: 503,
               wire.INTERNAL: 500}

# Triton's own words for a model that went away under the request: a dead Python-backend
# stub ("Stub process '...' is not healthy."), a model unloading, a server shutting down,
# a model it no longer knows.  Triton's errors carry no kind, some come with a status
# that blames the request (a dead stub's is a 400) and inside a stream none has a
# status, so only the words tell that these are the server's fault: 503, retry elsewhere.
STUB_NOT_HEALTHY = "is not healthy"
_TRITON_MODEL_GONE = (STUB_NOT_HEALTHY, "is unloading", "shutting down", "unknown model")


def model_error(message: str, status: int = 500) -> TritonError:
    """An error that Triton answered a request with, as a TritonError.

    The vLLM backend's errors carry their kind, which gives the status (and stays on
    the error, for what tells a dead engine from a busy one).  Triton's own
    get `status`, what the transport said (none inside a stream: 500), unless their
    words say the model went away.
    """
    kind, text = wire.read_error_kind(message)
    if kind is not None:
        return TritonError(text, KIND_STATUS[kind], kind)
    lowered = message.lower()
    if any(words in lowered for words in _TRITON_MODEL_GONE):
        return TritonError(message, 503)
    return TritonError(message, status)


class AbortTasks:
    """Abort requests in flight: started without waiting, awaited on shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def start(self, coroutine: Coroutine) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coroutine)
        except RuntimeError:  # no loop any more (interpreter shutdown)
            coroutine.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=ABORT_TIMEOUT_S)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    version: str
    ready: bool
    # The model config's `parameters` (string values), where the vLLM backend publishes
    # what describes the model (vllm_contract.py names them).
    parameters: dict[str, str]
    backend: str = ""
    outputs: tuple[str, ...] = ()  # output tensor names of the model config


class TritonClient(Protocol):
    async def server_ready(self) -> bool: ...

    async def list_models(self) -> list[ModelInfo]: ...

    # Whether stream_infer passes `parameters` and BYTES outputs as they are, which a
    # feed needs (feed.py).
    carries_feeds: bool

    def stream_infer(
        self, model: str, inputs: list[Tensor], outputs: list[str], request_id: str,
        parameters: dict[str, str] | None = None,
    ) -> AsyncIterator[InferResponse]:
        """Send one request to a decoupled model and yield its responses.

        `parameters`: the request's parameters (strings).  The iterator ends after the
        response flagged final.  Closing it early (a client that went away) must cancel
        the request in Triton.
        """
        ...

    async def model_health(self, model: str) -> None:
        """Ask a vLLM model whether it can serve (the backend's health check).

        Returns when it can; raises TritonError with the answer when not.  Cancelling it
        ends the request.
        """
        ...

    async def close(self) -> None: ...

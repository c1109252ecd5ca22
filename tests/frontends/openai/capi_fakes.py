"""A stand-in for libtritonserver's C API (triton_openai.triton.capi.Capi) whose server
start does what a test says: fail, raise, or block until released.  Enough for the
in-process client's start and stop; no inference goes through it."""

from __future__ import annotations

import ctypes
import threading

from triton_openai.triton import capi

# Any C function will do where the client only hands Triton's functions to the shim.
_ANY_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: None)
SERVER = 0x5E


class FakeCapi:
    path = "libtritonserver-fake.so"

    def __init__(self, start=None):
        self._start = start or (lambda: None)
        self.lib = self  # TRITONSERVER_* attributes: the shim's function pointers
        self.calls: list[str] = []
        self.stopped = threading.Event()

    def __getattr__(self, name: str):
        if name.startswith("TRITONSERVER_"):
            return _ANY_FUNCTION
        if name.startswith("ServerOptions") or name == "ResponseAllocatorNew":
            return lambda *args: None
        raise AttributeError(name)

    def ServerNew(self, server, options) -> None:
        self.calls.append("ServerNew")
        self._start()
        server._obj.value = SERVER

    def ServerStop(self, server) -> None:
        self.calls.append("ServerStop")

    def ServerDelete(self, server) -> None:
        assert server == SERVER
        self.calls.append("ServerDelete")
        self.stopped.set()


def failing_start(message: str = "failed to load 'broken': no such model folder"):
    def start():
        raise capi.CapiError("INVALID_ARG", message)
    return start

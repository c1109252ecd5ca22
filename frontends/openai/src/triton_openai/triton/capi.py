"""Triton's C API (`tritonserver.h`) through ctypes: the few calls the in-process client makes.

`libtritonserver.so` ships with every tritonserver (NGC's images, the nvidia-pytriton
wheel); nothing here needs a compiler or Triton's own Python bindings.  Every function's
signature is declared once, below, from `tritonserver.h`; a call that returns an error
raises :class:`CapiError` with Triton's code and message, and frees the error.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (
    POINTER,
    byref,
    c_bool,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path

# The library's usual places: NGC images and this project's images put tritonserver in
# /opt/tritonserver.
DEFAULT_HOME = "/opt/tritonserver"
LIBRARY_ENV = "TRITON_SERVER_LIBRARY"

# --- enums (tritonserver.h) -----------------------------------------------------------
MEMORY_CPU = 0
RESPONSE_COMPLETE_FINAL = 1
REQUEST_RELEASE_ALL = 1
MODEL_CONTROL_NONE, MODEL_CONTROL_POLL, MODEL_CONTROL_EXPLICIT = 0, 1, 2
METRIC_PROMETHEUS = 0

DATATYPES = ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
             "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"]
DATATYPE_CODES = {name: code for code, name in enumerate(DATATYPES)}

# TRITONSERVER_Error_Code -> the HTTP status Triton's own HTTP endpoint gives it.
ERROR_CODES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE",
               "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED"]
_HTTP_STATUS = {"NOT_FOUND": 400, "INVALID_ARG": 400, "UNAVAILABLE": 503, "UNSUPPORTED": 400}


class CapiError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        return _HTTP_STATUS.get(self.code, 500)


_ERR = c_void_p  # TRITONSERVER_Error*: NULL on success
_P = c_void_p

# name -> argument types, for every function that returns TRITONSERVER_Error*.
_CALLS = {
    "TRITONSERVER_ApiVersion": [POINTER(c_uint32), POINTER(c_uint32)],
    "TRITONSERVER_ServerOptionsNew": [POINTER(_P)],
    "TRITONSERVER_ServerOptionsDelete": [_P],
    "TRITONSERVER_ServerOptionsSetServerId": [_P, c_char_p],
    "TRITONSERVER_ServerOptionsSetModelRepositoryPath": [_P, c_char_p],
    "TRITONSERVER_ServerOptionsSetModelControlMode": [_P, c_int],
    "TRITONSERVER_ServerOptionsSetStartupModel": [_P, c_char_p],
    "TRITONSERVER_ServerOptionsSetStrictModelConfig": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetStrictReadiness": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetExitTimeout": [_P, c_uint32],
    "TRITONSERVER_ServerOptionsSetLogInfo": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetLogWarn": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetLogError": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetLogVerbose": [_P, c_int],
    "TRITONSERVER_ServerOptionsSetMetrics": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetGpuMetrics": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetCpuMetrics": [_P, c_bool],
    "TRITONSERVER_ServerOptionsSetBackendDirectory": [_P, c_char_p],
    "TRITONSERVER_ServerOptionsSetRepoAgentDirectory": [_P, c_char_p],
    "TRITONSERVER_ServerOptionsSetBackendConfig": [_P, c_char_p, c_char_p, c_char_p],
    "TRITONSERVER_ServerNew": [POINTER(_P), _P],
    "TRITONSERVER_ServerDelete": [_P],
    "TRITONSERVER_ServerStop": [_P],
    "TRITONSERVER_ServerIsLive": [_P, POINTER(c_bool)],
    "TRITONSERVER_ServerIsReady": [_P, POINTER(c_bool)],
    "TRITONSERVER_ServerModelIndex": [_P, c_uint32, POINTER(_P)],
    "TRITONSERVER_ServerModelConfig": [_P, c_char_p, c_int64, c_uint32, POINTER(_P)],
    "TRITONSERVER_ServerMetrics": [_P, POINTER(_P)],
    "TRITONSERVER_MetricsFormatted": [_P, c_int, POINTER(c_char_p), POINTER(c_size_t)],
    "TRITONSERVER_MetricsDelete": [_P],
    "TRITONSERVER_MessageSerializeToJson": [_P, POINTER(_P), POINTER(c_size_t)],
    "TRITONSERVER_MessageDelete": [_P],
    # The callbacks are C functions (_capi_shim.c), passed as pointers.
    "TRITONSERVER_ResponseAllocatorNew": [POINTER(_P), _P, _P, _P],
    "TRITONSERVER_InferenceRequestNew": [POINTER(_P), _P, c_char_p, c_int64],
    "TRITONSERVER_InferenceRequestDelete": [_P],
    "TRITONSERVER_InferenceRequestSetId": [_P, c_char_p],
    "TRITONSERVER_InferenceRequestSetBoolParameter": [_P, c_char_p, c_bool],
    "TRITONSERVER_InferenceRequestSetStringParameter": [_P, c_char_p, c_char_p],
    "TRITONSERVER_InferenceRequestAddInput": [_P, c_char_p, c_int, POINTER(c_int64), c_uint64],
    "TRITONSERVER_InferenceRequestAppendInputData": [_P, c_char_p, c_void_p, c_size_t,
                                                     c_int, c_int64],
    "TRITONSERVER_InferenceRequestAddRequestedOutput": [_P, c_char_p],
    "TRITONSERVER_InferenceRequestSetReleaseCallback": [_P, _P, _P],
    "TRITONSERVER_InferenceRequestSetResponseCallback": [_P, _P, _P, _P, _P],
    "TRITONSERVER_InferenceRequestCancel": [_P],
    "TRITONSERVER_ServerInferAsync": [_P, _P, _P],
}


def library_path(explicit: str | None = None) -> str:
    """Where libtritonserver.so is: the argument, $TRITON_SERVER_LIBRARY, or
    /opt/tritonserver/lib (where the nvidia-pytriton wheel's copy has a hashed name,
    libtritonserver-HASH.so)."""
    path = explicit or os.environ.get(LIBRARY_ENV)
    if not path:
        found = sorted(Path(DEFAULT_HOME, "lib").glob("libtritonserver*.so"))
        path = str(found[0]) if found else f"{DEFAULT_HOME}/lib/libtritonserver.so"
    if not Path(path).is_file():
        raise CapiError("NOT_FOUND", f"no Triton library at {path} (give --triton-library "
                                     f"or set ${LIBRARY_ENV} to libtritonserver.so)")
    return path


# Calls that wait (models load and unload): the interpreter's lock is released for them,
# and they run in threads of their own.  Every other call holds it: each is short, no
# Python runs on Triton's threads to wait for it, and a ctypes call that lets the lock go
# hands it to any other thread that wants it, for up to a switch interval (5 ms) before
# the event loop gets it back.
BLOCKING = frozenset({"TRITONSERVER_ServerNew", "TRITONSERVER_ServerStop",
                      "TRITONSERVER_ServerDelete"})


class Capi:
    """The loaded library: each declared function as a method that raises on error."""

    def __init__(self, path: str):
        self.lib = _open(Path(path))
        self.path = path
        # The same library (dlopen counts it once more), with calls that keep the lock.
        lib = ctypes.PyDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        self.fast = lib
        lib.TRITONSERVER_ErrorMessage.restype = c_char_p
        lib.TRITONSERVER_ErrorMessage.argtypes = [_P]
        lib.TRITONSERVER_ErrorCode.restype = c_int
        lib.TRITONSERVER_ErrorCode.argtypes = [_P]
        lib.TRITONSERVER_ErrorDelete.restype = None
        lib.TRITONSERVER_ErrorDelete.argtypes = [_P]
        for name, argtypes in _CALLS.items():
            fn = getattr(self.lib if name in BLOCKING else lib, name)
            fn.restype = _ERR
            fn.argtypes = argtypes
            setattr(self, name.removeprefix("TRITONSERVER_"), _checked(self, fn))

    def error_text(self, err: int) -> tuple[str, str]:
        code = self.fast.TRITONSERVER_ErrorCode(err)
        message = self.fast.TRITONSERVER_ErrorMessage(err) or b""
        name = ERROR_CODES[code] if 0 <= code < len(ERROR_CODES) else "UNKNOWN"
        return name, message.decode("utf-8", errors="replace")

    def raise_error(self, err: int) -> None:
        try:
            code, message = self.error_text(err)
        finally:
            self.fast.TRITONSERVER_ErrorDelete(err)
        raise CapiError(code, message)

    def version(self) -> tuple[int, int]:
        major, minor = c_uint32(), c_uint32()
        self.ApiVersion(byref(major), byref(minor))
        return major.value, minor.value

    def message_json(self, message: int) -> bytes:
        """A TRITONSERVER_Message's JSON, and the message freed."""
        try:
            base, size = c_void_p(), c_size_t()
            self.MessageSerializeToJson(message, byref(base), byref(size))
            return ctypes.string_at(base, size.value)
        finally:
            self.MessageDelete(message)


def _open(path: Path, depth: int = 0) -> ctypes.CDLL:
    """dlopen `path` and, first, those of its dependencies that only its folder has.

    tritonserver finds the libraries beside it through its own RPATH, which a dlopen from
    Python does not have; NGC's images put the folder on LD_LIBRARY_PATH instead, the
    nvidia-pytriton wheel does not.  RTLD_GLOBAL: the backends that Triton loads
    (libtriton_python.so) resolve the TRITONBACKEND_* symbols against this library.
    """
    while True:
        try:
            return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as err:
            missing = str(err).partition(":")[0].strip()
            beside = path.parent / missing
            if depth > 64 or not missing or "/" in missing or not beside.is_file():
                raise
            _open(beside, depth + 1)


def _checked(capi: Capi, fn):
    def call(*args):
        err = fn(*args)
        if err:
            capi.raise_error(err)
    call.__name__ = fn.__name__
    return call


_loaded: Capi | None = None


def load(path: str | None = None) -> Capi:
    """The library, loaded once per process."""
    global _loaded
    if _loaded is None:
        _loaded = Capi(library_path(path))
    return _loaded

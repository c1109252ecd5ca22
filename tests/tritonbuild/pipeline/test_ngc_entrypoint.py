"""The GPU image enters through NGC's entrypoint, whose Vertex AI hook puts tritonserver's
full path in front of the command when AIP_MODE is set; the image's own hook takes it off
again.  Run by bash with the stand-in of NGC's entrypoint and hook (scripts/ngc_standin/),
the paths in both hooks pointed at recording stand-ins for tritonserver and our entrypoint.
qa/L0_ngc_standin runs the same, unchanged, in the stand-in image."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tritonbuild.pipeline.components.system import (
    AIP_MODE_HOOK,
    ENTRYPOINT,
    NGC_ENTRYPOINT,
    NGC_TRITONSERVER,
)
from tritonbuild.pipeline.render import render

STANDIN = Path(__file__).resolve().parents[3] / "scripts" / "ngc_standin"
RECORDER = '#!/bin/bash\necho "$(basename "$0") $*" >> "$RECORD"\n'
# The line of NGC's entrypoint.d/99-check-run-aip-mode.sh on NVIDIA's release branches
# (24.10, 25.11, 26.08) that the stand-in must keep.
NGC_AIP_LINE = 'set -- ${AIP_MODE:+"/opt/tritonserver/bin/tritonserver"} "$@"'


@pytest.fixture
def ngc(plan_for, tmp_path):
    """An /opt/nvidia stand-in holding the rendered hook; `run(args, env)` enters it."""
    def make(with_hook=True):
        root = tmp_path / "nvidia"
        shutil.copytree(STANDIN, root, dirs_exist_ok=True)
        bindir = tmp_path / "bin"
        bindir.mkdir(exist_ok=True)
        for name in ("tritonserver", Path(ENTRYPOINT).name):
            (bindir / name).write_text(RECORDER)
            (bindir / name).chmod(0o755)
        if with_hook:
            text, _ = render(plan_for("--enable-gpu")).files[f"ngc/entrypoint.d/{AIP_MODE_HOOK}"]
            (root / "entrypoint.d" / AIP_MODE_HOOK).write_text(text)
        # The image's paths, pointed at the recorders here (the same in every hook).
        for hook in (root / "entrypoint.d").glob("*.sh"):
            hook.write_text(hook.read_text()
                            .replace(NGC_TRITONSERVER, str(bindir / "tritonserver"))
                            .replace(ENTRYPOINT, str(bindir / Path(ENTRYPOINT).name)))
        record = tmp_path / "record"

        def run(args, **env):
            record.write_text("")
            args = [str(bindir / Path(ENTRYPOINT).name) if a == ENTRYPOINT else a for a in args]
            full_env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
                        "RECORD": str(record), **env}
            subprocess.run(["bash", str(root / "nvidia_entrypoint.sh"), *args],
                           env=full_env, check=True, timeout=30)
            return record.read_text().strip()
        return run
    return make


def test_standin_hook_is_ngcs():
    text = (STANDIN / "entrypoint.d" / "99-check-run-aip-mode.sh").read_text()
    assert NGC_AIP_LINE in text.splitlines()
    assert f'"{NGC_TRITONSERVER}"' in NGC_AIP_LINE


def test_gpu_image_enters_through_ngc(plan_for):
    d = render(plan_for("--enable-gpu")).dockerfile
    assert f'ENTRYPOINT ["{NGC_ENTRYPOINT}", "{ENTRYPOINT}"]' in d
    assert "COPY ngc/entrypoint.d/ /opt/nvidia/entrypoint.d/" in d
    cpu = render(plan_for()).dockerfile
    assert f'ENTRYPOINT ["{ENTRYPOINT}"]' in cpu and "nvidia_entrypoint" not in cpu


def test_hook_sorts_after_ngc_aip_hook():
    ngc_hooks = sorted(p.name for p in (STANDIN / "entrypoint.d").glob("*.sh"))
    assert sorted(ngc_hooks + [AIP_MODE_HOOK])[-1] == AIP_MODE_HOOK


def test_without_the_hook_aip_mode_runs_tritonserver_instead(ngc, tmp_path):
    # What NGC's hook alone does to this image: our entrypoint becomes an argument.
    run = ngc(with_hook=False)
    assert run([ENTRYPOINT, "versions"], AIP_MODE="PREDICTION") == \
        f"tritonserver {tmp_path}/bin/entrypoint.sh versions"


@pytest.mark.parametrize("env", [{}, {"AIP_MODE": "PREDICTION"}, {"AIP_MODE": ""}])
def test_the_image_entrypoint_runs_with_or_without_aip_mode(ngc, env):
    run = ngc()
    assert run([ENTRYPOINT, "versions"], **env) == "entrypoint.sh versions"


def test_a_bare_tritonserver_in_front_is_taken_off_too(ngc, tmp_path):
    # Older NGC documentation shows the hook putting a bare `tritonserver` in front.
    run = ngc()
    hook = tmp_path / "nvidia" / "entrypoint.d" / "99-check-run-aip-mode.sh"
    hook.write_text('set -- ${AIP_MODE:+tritonserver} "$@"\n')
    assert run([ENTRYPOINT, "versions"], AIP_MODE="PREDICTION") == "entrypoint.sh versions"


def test_tritonserver_commands_are_left_alone(ngc, tmp_path):
    run = ngc()
    assert run(["tritonserver", "--model-repository=/m"], AIP_MODE="PREDICTION") == \
        "tritonserver tritonserver --model-repository=/m"
    assert run(["tritonserver", ENTRYPOINT]) == f"tritonserver {tmp_path}/bin/entrypoint.sh"

"""The GPU image enters through NGC's entrypoint, whose Vertex AI hook puts `tritonserver`
in front of the command when AIP_MODE is set; the image's own hook takes it off again.
Run by bash with the stand-in of NGC's entrypoint and hook (scripts/ngc_standin/)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tritonbuild.components.system import AIP_MODE_HOOK, ENTRYPOINT, NGC_ENTRYPOINT
from tritonbuild.render import render

STANDIN = Path(__file__).resolve().parents[2] / "scripts" / "ngc_standin"
RECORDER = '#!/bin/bash\necho "$(basename "$0") $*" >> "$RECORD"\n'


@pytest.fixture
def ngc(plan_for, tmp_path):
    """An /opt/nvidia stand-in holding the rendered hook; `run(args, env)` enters it."""
    def make(with_hook=True):
        root = tmp_path / "nvidia"
        shutil.copytree(STANDIN, root, dirs_exist_ok=True)
        if with_hook:
            text, _ = render(plan_for("--enable-gpu")).files[f"ngc/entrypoint.d/{AIP_MODE_HOOK}"]
            (root / "entrypoint.d" / AIP_MODE_HOOK).write_text(text)
        bindir = tmp_path / "bin"
        bindir.mkdir(exist_ok=True)
        for name in ("tritonserver", Path(ENTRYPOINT).name):
            (bindir / name).write_text(RECORDER)
            (bindir / name).chmod(0o755)
        record = tmp_path / "record"

        def run(args, **env):
            record.write_text("")
            full_env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
                        "RECORD": str(record), **env}
            subprocess.run(["bash", str(root / "nvidia_entrypoint.sh"), *args],
                           env=full_env, check=True, timeout=30)
            return record.read_text().strip()
        return run
    return make


def test_gpu_image_enters_through_ngc(plan_for):
    d = render(plan_for("--enable-gpu")).dockerfile
    assert f'ENTRYPOINT ["{NGC_ENTRYPOINT}", "{ENTRYPOINT}"]' in d
    assert "COPY ngc/entrypoint.d/ /opt/nvidia/entrypoint.d/" in d
    cpu = render(plan_for()).dockerfile
    assert f'ENTRYPOINT ["{ENTRYPOINT}"]' in cpu and "nvidia_entrypoint" not in cpu


def test_hook_sorts_after_ngc_aip_hook():
    ngc_hooks = sorted(p.name for p in (STANDIN / "entrypoint.d").glob("*.sh"))
    assert sorted(ngc_hooks + [AIP_MODE_HOOK])[-1] == AIP_MODE_HOOK


def test_without_the_hook_aip_mode_runs_tritonserver_instead(ngc):
    # What NGC's hook alone does to this image: our entrypoint becomes an argument.
    run = ngc(with_hook=False)
    assert run(["entrypoint.sh", "versions"], AIP_MODE="PREDICTION") == \
        "tritonserver entrypoint.sh versions"


@pytest.mark.parametrize("env", [{}, {"AIP_MODE": "PREDICTION"}])
def test_the_image_entrypoint_runs_with_or_without_aip_mode(ngc, plan_for, env, tmp_path):
    run = ngc()
    # The hook matches the entrypoint's full path; here it is on PATH by its name, so the
    # hook's path is pointed there.
    hook = tmp_path / "nvidia" / "entrypoint.d" / AIP_MODE_HOOK
    hook.write_text(hook.read_text().replace(ENTRYPOINT, Path(ENTRYPOINT).name))
    assert run([Path(ENTRYPOINT).name, "versions"], **env) == "entrypoint.sh versions"


def test_tritonserver_commands_are_left_alone(ngc):
    run = ngc()
    assert run(["tritonserver", "--model-repository=/m"], AIP_MODE="PREDICTION") == \
        "tritonserver tritonserver --model-repository=/m"

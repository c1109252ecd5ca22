"""The Dockerfile snippet for an existing Triton image: golden files, lint, and the README.

Regenerate after an intended change: TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/tritonbuild
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tritonbuild import pins
from tritonbuild.tools import snippet

REPO = Path(__file__).resolve().parents[3]
BACKEND_README = REPO / "backends" / "vllm" / "README.md"
# Apart from golden/, which holds exactly what build.py's cases render.
GOLDEN = Path(__file__).resolve().parent / "golden_snippet"
CASES = {
    "ngc.Dockerfile": [],
    "ngc-25.11-no-frontend.Dockerfile": ["--upstream-container-version=25.11", "--no-frontend"],
    "from-image.Dockerfile": ["--from", "tritonserver-vllm:install-base", "--user", "1000"],
}


def printed(argv: list[str], capsys) -> str:
    assert snippet.main(argv) == 0
    return capsys.readouterr().out


def readme_block(marker: str) -> str:
    """The fenced block right after `<!-- MARKER -->` in the backend's README."""
    text = BACKEND_README.read_text()
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)```\n", text, re.S)
    assert found, f"no block after <!-- {marker} --> in {BACKEND_README}"
    return found.group(1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name, capsys, update_golden):
    text = printed(CASES[name], capsys)
    golden = GOLDEN / name
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"{name} differs from its golden file"


@pytest.mark.parametrize("name", sorted(CASES))
def test_hadolint_clean(name, capsys, hadolint):
    text = printed(CASES[name], capsys)
    out = subprocess.run([hadolint, "-c", str(REPO / "dockerfiles" / "hadolint.yaml"), "-"],
                         input=text, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_pins_and_release(capsys):
    text = printed([], capsys)
    release = pins.get("triton.gpu_upstream_container_version")
    assert f"FROM {pins.get('base.gpu_image_repository')}:{release}-py3\n" in text
    assert f"{pins.get('vllm.gpu_package')}=={pins.gpu_vllm_version()}" in text
    assert f"numpy=={pins.get('python_packages.numpy')}" in text
    assert "FROM nvcr.io/nvidia/tritonserver:25.11-py3\n" in printed(
        ["--upstream-container-version", "25.11"], capsys)


def test_readme_shows_the_snippet_as_printed(capsys):
    assert readme_block("output of: python3 -m tritonbuild.tools.snippet") == printed([], capsys)


def test_readme_install_commands_are_the_snippets():
    # The snippet runs the very command the README gives for a running container.
    lines = readme_block("install commands").splitlines()
    assert lines[0] == "cd backends/vllm"
    assert lines[1] == snippet.install_command()


@pytest.mark.parametrize("argv, message", [
    (["--upstream-container-version", "2410"], "expected YY.MM, e.g. 24.10"),
    (["--upstream-container-version", "24.10", "--from", "x:1"], "give one"),
])
def test_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        snippet.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err

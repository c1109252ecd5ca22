"""The workflow files are valid GitHub Actions workflows, pass zizmor's checks, and hold no
logic of their own: every `run:` calls one of the project's scripts."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WORKFLOWS = sorted((Path(__file__).resolve().parents[1] / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    found = BIN / name if (BIN / name).exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed")
    return str(found)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_valid_workflow(workflow):
    out = subprocess.run([tool("check-jsonschema"), "--builtin-schema",
                          "vendor.github-workflows", str(workflow)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_zizmor_clean(workflow):
    out = subprocess.run([tool("zizmor"), "--offline", str(workflow)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_runs_only_project_scripts(workflow):
    runs = [line.split("run:", 1)[1].strip() for line in workflow.read_text().splitlines()
            if line.strip().startswith("run:")]
    assert runs, "no run step"
    for command in runs:
        # The nightly sets its fresh machine up with the README's first command, verbatim.
        if command == readme_first_command():
            continue
        assert command.removeprefix("sudo ").startswith("scripts/"), command


def readme_first_command() -> str:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    first = readme.split("```sh\n", 1)[1].splitlines()[0]
    return first.split("   #", 1)[0].strip()

"""The nightly workflow: clean under yamllint, made only of calls to the repository's
scripts (the same a person runs) and the README's first command, with the legs the issue
of a nightly needs.  tests/test_workflows.py checks every workflow file against GitHub's
workflow schema and zizmor; actionlint's PyPI wrapper downloads its binary when
installed, which these machines cannot, so the schema and zizmor stand in for it."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"
YAMLLINT_CONFIG = ("{extends: default, rules: {line-length: {max: 120}, "
                   "truthy: {check-keys: false}, document-start: disable}}")


def tool(name: str) -> str:
    path = Path(os.environ.get("TVB_VENV", "/nonexistent"), "bin", name)
    if not path.exists():
        pytest.fail(f"{name} is missing: scripts/setup_host.sh installs it "
                    f"(requirements/host-test.txt)")
    return str(path)


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_yamllint():
    out = run(tool("yamllint"), "-s", "-d", YAMLLINT_CONFIG, str(WORKFLOW))
    assert out.returncode == 0, out.stdout + out.stderr


def steps() -> list[dict]:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return [step for job in jobs.values() for step in job["steps"]]


def test_every_step_is_a_script_of_the_repository():
    readme_first = README_FIRST_COMMAND()
    for step in steps():
        if "uses" in step:
            # Third-party actions pinned to a commit, never a moving tag.
            assert re.fullmatch(r"actions/(checkout|upload-artifact)@[0-9a-f]{40}", step["uses"])
            continue
        command = step["run"].strip()
        assert command == readme_first or re.fullmatch(r"scripts/[a-z_]+\.(sh|py)( [a-z-]+)?",
                                                       command), command
        assert "${{" not in command  # no expression expanded into a shell line


def README_FIRST_COMMAND() -> str:
    block = re.search(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL).group(1)
    return re.sub(r"\s+#.*$", "", block.splitlines()[0]).strip()


def test_the_fresh_machine_is_set_up_with_the_readmes_first_command():
    assert README_FIRST_COMMAND() in [s.get("run", "").strip() for s in steps()]


def test_ci_runs_the_readmes_test_command():
    assert "exec scripts/run_tests.sh" in (REPO / ".ci" / "run").read_text()


def test_the_legs_the_workflow_runs_exist_in_the_script():
    legs = {s["run"].split()[1] for s in steps()
            if s.get("run", "").startswith("scripts/nightly.sh")}
    assert legs == {"cpu", "newest-vllm", "gpu-render", "gpu"}
    script = (REPO / "scripts" / "nightly.sh").read_text()
    for leg in legs:
        assert re.search(rf"^{re.escape(leg)}\)$", script, re.MULTILINE), leg


def test_newest_vllm_leg_is_not_a_gate_and_gpu_needs_a_gpu_runner():
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    assert jobs["newest-vllm"]["continue-on-error"] is True
    assert "gpu" in jobs["gpu"]["runs-on"] and "HAS_GPU_RUNNER" in jobs["gpu"]["if"]
    assert "gpu" not in jobs["gpu-render"]["runs-on"]


def test_script_syntax():
    for script in ("nightly.sh", "registry_login.sh"):
        out = run("bash", "-n", str(REPO / "scripts" / script))
        assert out.returncode == 0, out.stderr

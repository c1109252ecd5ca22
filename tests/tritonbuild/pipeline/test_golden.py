"""Whole rendered outputs compared with golden files, so every change is reviewed as a diff.

Regenerate after an intended change: TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/tritonbuild
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonbuild.hostenv import REPO_ROOT
from tritonbuild.pipeline.engine import DockerCli
from tritonbuild.pipeline.flags import parse_flags
from tritonbuild.pipeline.render import render
from tritonbuild.pipeline.validate import make_plan

BUILD_DIR = "/srv/tvb-build"
CASES = {
    "cpu-default": [],
    "cpu-openai": ["--backend=vllm", "--endpoint=openai"],
    "cpu-full": ["--backend=vllm", "--endpoint=openai", "--endpoint=sagemaker",
                 "--endpoint=vertex-ai", "--filesystem=s3", "--enable-logging",
                 "--enable-stats", "--enable-tracing", "--enable-metrics",
                 "--enable-cpu-metrics", "--pip-index-url=https://pypi.example/simple",
                 "--pip-extra-index-url=https://download.pytorch.org/whl/cpu",
                 "--tag=me/triton:dev", "--no-cache", "-v", "--container-version=1.0.0"],
    "cpu-python-only": ["--backend=python", "--endpoint=http"],
    "gpu-openai": ["--enable-gpu", "--backend=vllm", "--endpoint=openai", "--enable-metrics",
                   "--enable-gpu-metrics", "--enable-cpu-metrics"],
    "gpu-all": ["--enable-all", "-q"],
    "cpu-serve-model": ["--backend=vllm", "--endpoint=openai",
                        f"--serve-model={REPO_ROOT}/tests/tritonbuild/data/my-llm",
                        "--serve-model-args=--max-model-len 2048 --tool-call-parser hermes"],
}


def outputs(plan) -> dict[str, str]:
    rendered = render(plan)
    engine = DockerCli(binary="/usr/bin/docker", buildx=False)
    command = engine.command(plan, plan.build_dir.value / "Dockerfile",
                             plan.build_dir.value / "context")
    files = {"Dockerfile": rendered.dockerfile, "build.sh": command.script(),
             "plan.json": plan.to_json()}
    for dest, (text, _) in rendered.files.items():
        if dest in ("image/entrypoint.sh", "image/versions.json"):
            files[dest] = text
    return files


def normalize(text: str, host) -> str:
    # Paths of the test machine's fixtures are not part of what is reviewed.
    text = text.replace(str(host.find_links), "<wheelhouse>").replace(str(host.pip_cert), "<cert>")
    # The committed GPU locks are read from this checkout, wherever it was cloned.
    text = text.replace(str(host.repo_root), "<repo>")
    return text.replace(str(REPO_ROOT), "<checkout>")


@pytest.mark.parametrize("name", CASES)
def test_golden(name, golden_host, golden_dir, update_golden, update_golden_env):
    host = golden_host
    plan = make_plan(parse_flags([*CASES[name], f"--build-dir={BUILD_DIR}"]), host)
    files = outputs(plan)
    root = golden_dir / name
    if update_golden:
        write_golden(root, {rel: normalize(text, host) for rel, text in files.items()})
        return
    for rel, text in files.items():
        golden = root / rel
        assert golden.exists(), f"no golden file {golden}: run with {update_golden_env}=1"
        assert normalize(text, host) == golden.read_text(), \
            f"{name}/{rel} differs from its golden file (an intended change: {update_golden_env}=1)"
    assert on_disk(root) == set(files), f"stale golden files: run with {update_golden_env}=1"


def on_disk(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def write_golden(root: Path, files: dict[str, str]) -> None:
    """The case's golden folder holds exactly these files afterwards."""
    for rel in on_disk(root) - set(files):
        (root / rel).unlink()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_update_env_regenerates_every_golden_file(tmp_path, update_golden_env):
    # The documented command, pointed at a scratch copy: it writes what the cases render
    # (so exactly the golden files of this checkout) and drops files no case makes.
    scratch = tmp_path / "golden"
    (scratch / "cpu-default").mkdir(parents=True)
    (scratch / "cpu-default" / "stale.txt").write_text("no case renders this\n")
    env = {**os.environ, update_golden_env: "1", "TVB_GOLDEN_DIR": str(scratch)}
    here = Path(__file__).resolve()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"{here}::test_golden"], env=env, cwd=here.parents[3],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    golden = here.parent / "golden"
    assert on_disk(scratch) == on_disk(golden)
    for rel in on_disk(golden):
        assert (scratch / rel).read_text() == (golden / rel).read_text(), rel


HADOLINT_CONFIG = Path(__file__).resolve().parents[3] / "dockerfiles" / "hadolint.yaml"


# Flag sets that take other branches of the templates, linted on top of the golden cases.
LINT_ONLY = {
    "cpu-split-base": ["--image=base,my/debian:bookworm", "--image=inference,my/slim:1",
                       "--endpoint=openai"],
    "gpu-split-base": ["--enable-gpu", "--image=base,my/devel:1", "--endpoint=openai"],
    "gpu-python-only": ["--enable-gpu", "--backend=python", "--wheelhouse=none"],
    "cpu-index-no-wheelhouse": ["--wheelhouse=none",
                                "--pip-extra-index-url=https://download.pytorch.org/whl/cpu"],
}


@pytest.mark.parametrize("name", [*CASES, *LINT_ONLY])
def test_hadolint(name, plan_for, tmp_path, hadolint):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(render(plan_for(*{**CASES, **LINT_ONLY}[name])).dockerfile)
    out = subprocess.run([hadolint, "--no-color", "--config", str(HADOLINT_CONFIG),
                          str(dockerfile)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr

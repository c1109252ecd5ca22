"""Whole rendered outputs compared with golden files, so every change is reviewed as a diff.

Regenerate after an intended change: TVB_update_golden=1 python -m pytest tests/tritonbuild
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tritonbuild.engine import DockerCli
from tritonbuild.flags import parse_flags
from tritonbuild.render import render
from tritonbuild.validate import make_plan

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
    return text.replace(str(host.repo_root), "<repo>")


@pytest.mark.parametrize("name", CASES)
def test_golden(name, golden_host, golden_dir, update_golden):
    host = golden_host
    plan = make_plan(parse_flags([*CASES[name], f"--build-dir={BUILD_DIR}"]), host)
    files = outputs(plan)
    root = golden_dir / name
    for rel, text in files.items():
        text = normalize(text, host)
        golden = root / rel
        if update_golden:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text)
            continue
        assert golden.exists(), f"no golden file {golden}: run with TVB_update_golden=1"
        assert text == golden.read_text(), f"{name}/{rel} differs from its golden file"
    if not update_golden:
        on_disk = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        assert on_disk == set(files), "stale golden files"


HADOLINT_CONFIG = Path(__file__).resolve().parents[2] / "dockerfiles" / "hadolint.yaml"


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

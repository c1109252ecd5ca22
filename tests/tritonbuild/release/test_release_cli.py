"""build.py --qa and --push with a fake engine, QA runner and registry: the order
(build, QA, push), a QA failure stops the push, and the flags' checks."""
from __future__ import annotations

import json

import pytest

from tests.tritonbuild.release.test_publish import FakeRegistry
from tests.tritonbuild.test_build_cli import FakeEngine
from tritonbuild.cli import main
from tritonbuild.release.plan import QA_SUITES, ReleaseFacts

FACTS = ReleaseFacts(git_sha="0123456789abcdef0123", dirty=False, date="20261201",
                     arch="x86_64")
BASE = ["--backend=vllm", "--endpoint=openai"]


def run(argv, host, tmp_path, qa_status=0, facts=FACTS):
    calls, registry = [], FakeRegistry()

    def qa(image, suites, out):
        calls.append((image, tuple(suites), out))
        return qa_status
    code = main(BASE + argv + [f"--build-dir={tmp_path}"], host=host, engine=FakeEngine(),
                release_facts=facts, qa=qa, registry=registry,
                make_sbom=lambda image: {"bomFormat": "CycloneDX", "image": image})
    return code, calls, registry


def test_qa_runs_the_chosen_suites_on_the_built_image(host, tmp_path):
    code, calls, _ = run(["--qa=L0_image,qa/L0_openai", "--tag=t:x"], host, tmp_path)
    assert code == 0
    assert calls == [("t:x", ("L0_image", "L0_openai"), tmp_path / "qa")]
    plan = json.loads((tmp_path / "release.json").read_text())
    assert plan["qa_suites"] == {"value": ["L0_image", "L0_openai"], "source": "flag"}


def test_bare_qa_runs_every_suite(host, tmp_path):
    assert run(["--qa"], host, tmp_path)[1][0][1] == QA_SUITES


def test_failed_qa_is_not_pushed(host, tmp_path, capsys):
    code, _, registry = run(["--qa", "--push=127.0.0.1:5000/t"], host, tmp_path, qa_status=1)
    assert code == 3 and registry.log == []
    err = capsys.readouterr().err
    assert "QA failed" in err and "nothing was pushed" in err


def test_push_after_green_qa_records_the_digest(host, tmp_path):
    code, _, registry = run(["--qa=L0_image", "--push=127.0.0.1:5000/t",
                             "--release-kind=nightly"], host, tmp_path)
    assert code == 0
    image_tags = {t for t in registry.tags if not t.endswith(".sbom")}
    assert image_tags == {"24.10-vllm-python-py3-cpu-nightly.20261201-0123456789ab-amd64",
                                  "24.10-vllm-python-py3-cpu-nightly.20261201-0123456789ab",
                                  "nightly-cpu"}
    assert json.loads((tmp_path / "published.json").read_text())["digest"].startswith("sha256:")
    assert json.loads((tmp_path / "sbom.cdx.json").read_text())["image"] == "tritonserver-vllm:24.10-cpu"


@pytest.mark.parametrize("argv,facts,message", [
    (["--qa=L0_bogus"], FACTS,
     "--qa=L0_bogus: suites: L0_image, L0_reliability, L0_lifecycle, L0_backend_vllm, L0_openai, "
     "L0_aiperf"),
    (["--release-kind=release"], FACTS, "--release-kind=release: needs --push"),
    (["--push=t/x"], FACTS, "--push=t/x: 't' is not a registry host"),
    (["--push=r.io/x", "--release-kind=weekly"], FACTS, "allowed: release, nightly, local"),
    (["--qa", "--dryrun"], FACTS, "--dryrun=true: builds nothing to run --qa or --push on"),
    (["--push=r.io/x", "--release-kind=release"],
     ReleaseFacts("0123456789abcdef", True, "20261201", "x86_64"), "must come from a clean tree"),
])
def test_refused_before_anything_is_built(argv, facts, message, host, tmp_path, capsys):
    code, calls, registry = run(argv, host, tmp_path / "b", facts=facts)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "\n" not in err.strip()
    assert calls == [] and registry.log == [] and not (tmp_path / "b").exists()

"""The two passes of scripts/run_tests.sh: which suites run against the image."""

import subprocess
import sys
from pathlib import Path

from qa.common.passes import IMAGE_PASS_SUITES, in_image_pass

REPO = Path(__file__).resolve().parents[2]


def test_every_image_pass_suite_exists():
    for suite in IMAGE_PASS_SUITES:
        assert (REPO / suite).is_dir(), suite


def test_paths_in_and_out_of_the_image_pass():
    assert in_image_pass("qa/L0_openai/test_openai_api.py")
    assert in_image_pass("qa/L0_openai")
    assert not in_image_pass("qa/L0_openai_extra/test_x.py")
    assert not in_image_pass("qa/L0_image/test_image.py")
    assert not in_image_pass("tests/qa/test_passes.py")


def test_run_tests_takes_the_suites_from_one_place():
    script = (REPO / "scripts/run_tests.sh").read_text()
    assert "qa/common/passes.py" in script
    for suite in IMAGE_PASS_SUITES:
        assert suite not in script, f"{suite} is named in run_tests.sh as well"


def test_the_list_prints_without_the_suites_pythonpath():
    """run_tests.sh runs the file with a bare interpreter: no pytest pythonpath."""
    out = subprocess.run([sys.executable, "qa/common/passes.py"], cwd=REPO, env={},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == list(IMAGE_PASS_SUITES)


def test_the_gate_suite_is_one_build_py_runs_and_not_an_image_pass_suite():
    """The host pass leaves it out because qa/L0_publish runs it as build.py's QA gate."""
    from qa.common.passes import QA_GATE_SUITE
    from tritonbuild.release.plan import QA_SUITES
    assert QA_GATE_SUITE in QA_SUITES and (REPO / "qa" / QA_GATE_SUITE).is_dir()
    assert not in_image_pass(f"qa/{QA_GATE_SUITE}")
    out = subprocess.run([sys.executable, "qa/common/passes.py", "--gate"], cwd=REPO, env={},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"qa/{QA_GATE_SUITE}"
    script = (REPO / "scripts/run_tests.sh").read_text()
    assert '--ignore="$gate_suite"' in script and "passes.py --gate" in script

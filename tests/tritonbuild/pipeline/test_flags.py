import pytest

from tritonbuild.errors import ValidationError
from tritonbuild.pipeline.flags import ENABLE_FEATURES, make_parser, parse_flags


def test_only_given_flags_are_returned():
    assert parse_flags([]) == {}
    assert parse_flags(["--enable-metrics", "--backend=vllm", "--backend", "python"]) == {
        "enable_metrics": True, "backend": ["vllm", "python"]}


def test_repeatable_and_paired_flags():
    flags = parse_flags(["--build-secret", "pip_cert", "/x", "--image", "base,a:b",
                         "--image=inference,c:d", "-vv"])
    assert flags == {"build_secret": [["pip_cert", "/x"]], "image": ["base,a:b", "inference,c:d"],
                     "verbose": 2}


def test_every_upstream_flag_exists():
    options = {o for a in make_parser()._actions for o in a.option_strings}
    upstream = {"--backend", "--endpoint", "--filesystem", "--enable-gpu", "--enable-all",
                "--upstream-container-version", "--container-version", "--image",
                "--build-dir", "--dryrun", "-v", "-q", "--build-secret"}
    upstream |= {f"--enable-{f}" for f in ENABLE_FEATURES}
    ours = {"--tag", "--pip-index-url", "--pip-extra-index-url", "--wheelhouse", "--no-cache",
            "--vllm-version"}
    assert upstream | ours <= options


def test_unknown_flag_is_one_line_validation_error():
    with pytest.raises(ValidationError) as e:
        parse_flags(["--no-such-flag"])
    assert "\n" not in str(e.value) and "--no-such-flag" in str(e.value)

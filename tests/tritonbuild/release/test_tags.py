"""NGC-style tags: every kind and flavor, and the facts that are refused."""
from __future__ import annotations

import pytest

from tritonbuild.release.tags import TagError, compute_tags

SHA = "4b86c8e0123456789abcdef0123456789abcdef0"

CASES = [
    # kind, flavor, dirty -> immutable, floating
    ("release", "gpu", False, "24.10-vllm-python-py3-4b86c8e01234",
     ("24.10-vllm-python-py3", "latest")),
    ("release", "cpu", False, "24.10-vllm-python-py3-cpu-4b86c8e01234",
     ("24.10-vllm-python-py3-cpu", "latest-cpu")),
    ("nightly", "gpu", False, "24.10-vllm-python-py3-nightly.20261201-4b86c8e01234",
     ("nightly",)),
    ("nightly", "cpu", False, "24.10-vllm-python-py3-cpu-nightly.20261201-4b86c8e01234",
     ("nightly-cpu",)),
    ("local", "cpu", False, "24.10-vllm-python-py3-cpu-dev.4b86c8e01234", ()),
    ("local", "gpu", True, "24.10-vllm-python-py3-dev.4b86c8e01234-dirty", ()),
]


@pytest.mark.parametrize("kind,flavor,dirty,immutable,floating", CASES)
def test_tags(kind, flavor, dirty, immutable, floating):
    tags = compute_tags(release="24.10", flavor=flavor, kind=kind, git_sha=SHA, arch="x86_64",
                        date="20261201", dirty=dirty)
    assert tags.immutable == immutable
    assert tags.floating == floating
    assert tags.arch == immutable + "-amd64"
    assert tags.all == (tags.arch, immutable, *floating)


def test_arm64_and_every_tag_is_a_valid_docker_tag():
    import re
    tags = compute_tags(release="26.08", flavor="cpu", kind="nightly", git_sha=SHA,
                        arch="aarch64", date="20261201")
    assert tags.arch.endswith("-arm64")
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", t) for t in tags.all)


REFUSED = [
    (dict(release="2410"), "release '2410': expected YY.MM, e.g. 24.10"),
    (dict(flavor="tpu"), "flavor 'tpu': expected cpu or gpu"),
    (dict(kind="weekly"), "kind 'weekly': expected one of release, nightly, local"),
    (dict(git_sha="HEAD"), "git sha 'HEAD': expected 7 to 40 lower-case hex digits"),
    (dict(arch="riscv64"), "architecture 'riscv64': expected one of aarch64, amd64, arm64, x86_64"),
    (dict(kind="nightly", date=None), "nightly date None: expected YYYYMMDD"),
    (dict(kind="release", dirty=True), "a release build must come from a clean tree: commit or "
                                       "stash the changes, or publish it as local"),
]


@pytest.mark.parametrize("change,message", REFUSED)
def test_refused(change, message):
    facts = dict(release="24.10", flavor="cpu", kind="local", git_sha=SHA, arch="x86_64",
                 date="20261201", dirty=False)
    with pytest.raises(TagError) as e:
        compute_tags(**{**facts, **change})
    assert str(e.value) == message

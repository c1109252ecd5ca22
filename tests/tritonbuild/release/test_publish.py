"""Publishing with a fake registry: push once, promote by digest, all or nothing.
The real registry round trip is qa/L0_image/test_publish_registry.py."""
from __future__ import annotations

import json

import pytest

from tritonbuild.release.publish import (
    CredentialsError,
    PublishError,
    Registry,
    parse_target,
    publish,
)
from tritonbuild.release.tags import compute_tags

D_NEW, D_OLD = "sha256:" + "a" * 64, "sha256:" + "b" * 64
TAGS = compute_tags(release="24.10", flavor="cpu", kind="release", git_sha="1234567890abcdef",
                    arch="x86_64")


class FakeRegistry(Registry):
    def __init__(self, tags=None, fail_copy_to=None, deny=False):
        self.tags = dict(tags or {})
        self.fail_copy_to, self.deny, self.log = fail_copy_to, deny, []

    def push(self, image, target, tag):
        if self.deny:
            raise CredentialsError("127.0.0.1:5000 refused the credentials")
        self.log.append(("push", tag))
        self.tags[tag] = D_NEW
        return D_NEW

    def digest(self, target, tag):
        return self.tags.get(tag)

    def push_file(self, target, tag, name, data, labels):
        self.log.append(("push_file", tag, name))
        self.files = {**getattr(self, "files", {}), tag: (data, labels)}
        self.tags[tag] = "sha256:" + "f" * 64
        return self.tags[tag]

    def copy(self, target, digest, tag):
        self.log.append(("copy", digest, tag))
        if tag == self.fail_copy_to and digest == D_NEW:
            raise PublishError(f"tagging as {tag} failed: boom")
        self.tags[tag] = digest


def test_push_once_then_promote_by_digest_and_record(tmp_path):
    reg = FakeRegistry({"latest-cpu": D_OLD})
    target = parse_target("127.0.0.1:5000/triton/vllm")
    done = publish("tritonserver-vllm:x", target, TAGS, reg, tmp_path)
    assert reg.log[0] == ("push", TAGS.arch)
    assert [e for e in reg.log if e[0] == "push"] == [("push", TAGS.arch)]  # one upload
    assert all(e[1] == D_NEW for e in reg.log[1:])                            # by digest
    assert {t: reg.tags[t] for t in TAGS.all} == dict.fromkeys(TAGS.all, D_NEW)
    recorded = json.loads((tmp_path / "published.json").read_text())
    assert recorded["digest"] == D_NEW == done.digest
    assert recorded["reference"] == f"127.0.0.1:5000/triton/vllm@{D_NEW}"
    assert recorded["tags"] == list(TAGS.all)


def test_a_failed_promotion_moves_the_others_back(tmp_path):
    reg = FakeRegistry({"24.10-vllm-python-py3-cpu": D_OLD, "latest-cpu": D_OLD},
                       fail_copy_to="latest-cpu")
    with pytest.raises(PublishError, match="floating tags were left as they were "
                                           r"\(24.10-vllm-python-py3-cpu moved back\)"):
        publish("img", parse_target("r.example.com/t"), TAGS, reg, tmp_path)
    assert reg.tags["24.10-vllm-python-py3-cpu"] == reg.tags["latest-cpu"] == D_OLD
    assert not (tmp_path / "published.json").exists()


def test_refused_credentials_push_nothing(tmp_path):
    reg = FakeRegistry(deny=True)
    with pytest.raises(CredentialsError):
        publish("img", parse_target("localhost:5000/t"), TAGS, reg, tmp_path)
    assert reg.tags == {} and reg.log == []


@pytest.mark.parametrize("value,message", [
    ("tritonserver", "expected REGISTRY/REPOSITORY"),
    ("myorg/tritonserver", "'myorg' is not a registry host"),
    ("nvcr.io/myorg/Triton", "lower-case path components, without a tag"),
    ("nvcr.io/myorg/triton:24.10", "lower-case path components, without a tag"),
])
def test_bad_targets(value, message):
    with pytest.raises(PublishError, match=message):
        parse_target(value)


def test_loopback_targets():
    assert parse_target("127.0.0.1:5000/x").loopback
    assert parse_target("localhost:5000/x").loopback
    assert not parse_target("nvcr.io/x/y").loopback


def test_the_sbom_goes_beside_the_image_before_any_tag_moves(tmp_path):
    reg = FakeRegistry()
    done = publish("img", parse_target("r.example.com/t"), TAGS, reg, tmp_path, sbom=b"{}\n")
    sbom_tag = D_NEW.replace(":", "-") + ".sbom"
    assert reg.log[1] == ("push_file", sbom_tag, "sbom.cdx.json")
    assert reg.files[sbom_tag][1]["io.triton-vllm.sbom-of"] == f"r.example.com/t@{D_NEW}"
    assert (tmp_path / "sbom.cdx.json").read_bytes() == b"{}\n"
    recorded = json.loads((tmp_path / "published.json").read_text())
    assert recorded["sbom"] == {"tag": sbom_tag, "digest": "sha256:" + "f" * 64,
                                "file": "sbom.cdx.json"} and done.sbom_tag == sbom_tag

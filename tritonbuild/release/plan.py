"""What happens after the image is built: QA against it, then publishing.

    ./build.py ... --qa[=SUITES] [--push REGISTRY/REPO [--release-kind KIND]]

A ReleasePlan is made from the flags and a few facts of the checkout (commit, dirty or
not, date, architecture), each value Sourced like the build plan's.  The order is fixed:
build, QA (when asked), publish (when asked): an image that fails QA is never pushed.
"""
from __future__ import annotations

import datetime
import json
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..errors import ConflictError, MalformedValueError, UnknownValueError
from ..pipeline.plan import Sourced
from .publish import PublishError, Target, parse_target
from .tags import KINDS, ImageTags, TagError, compute_tags

__all__ = ["QA_SUITES", "ReleaseFacts", "ReleasePlan", "discover_release_facts",
           "make_release_plan"]

# Suites that run against a built image (container mode), in the order they run: the
# cheap image checks first, so that a broken image fails in a minute; the aiperf profile
# last, once the API it loads has passed.
QA_SUITES = ("L0_image", "L0_reliability", "L0_lifecycle", "L0_backend_vllm", "L0_openai",
             "L0_aiperf")


@dataclass(frozen=True)
class ReleaseFacts:
    git_sha: str
    dirty: bool
    date: str          # YYYYMMDD, UTC
    arch: str          # platform.machine()


def discover_release_facts(repo_root: Path) -> ReleaseFacts:
    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(repo_root), *args], capture_output=True,
                             text=True, timeout=60)
        return out.stdout.strip() if out.returncode == 0 else ""
    sha = git("rev-parse", "HEAD") or "0000000"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    date = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d")
    return ReleaseFacts(sha, dirty, date, platform.machine())


@dataclass(frozen=True)
class ReleasePlan:
    qa_suites: Sourced[tuple[str, ...]]         # empty: no QA
    push: Sourced[Target | None]
    release_kind: Sourced[str]
    git_sha: Sourced[str]
    dirty: Sourced[bool]
    tags: Sourced[ImageTags | None]

    def to_json(self) -> str:
        out: dict[str, Any] = {}
        for f in fields(self):
            v: Sourced = getattr(self, f.name)
            value = v.value
            if isinstance(value, Target):
                value = f"{value.registry}/{value.repository}"
            elif isinstance(value, ImageTags):
                value = {"arch": value.arch, "immutable": value.immutable,
                         "floating": list(value.floating)}
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = {"value": value, "source": v.source}
        return json.dumps(out, indent=2) + "\n"


def _suites(value: str) -> tuple[str, ...]:
    if value in ("", "all"):
        return QA_SUITES
    chosen = []
    for name in value.split(","):
        name = name.strip().removeprefix("qa/").rstrip("/")
        if name not in QA_SUITES:
            raise UnknownValueError("--qa", value, f"suites: {', '.join(QA_SUITES)} (or all)")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def make_release_plan(flags: Mapping[str, Any], facts: ReleaseFacts, *, release: str,
                      flavor: str) -> ReleasePlan:
    qa = (Sourced(_suites(flags["qa"]), "flag") if "qa" in flags
          else Sourced((), "default"))
    push: Sourced[Target | None] = Sourced(None, "default")
    if "push" in flags:
        try:
            push = Sourced(parse_target(flags["push"]), "flag")
        except PublishError as e:
            raise MalformedValueError("--push", flags["push"],
                                      str(e).split(": ", 1)[-1]) from None
    kind = Sourced("local", "default", "a push moves no shared tag unless asked")
    if "release_kind" in flags:
        if flags["release_kind"] not in KINDS:
            raise UnknownValueError("--release-kind", flags["release_kind"],
                                    f"allowed: {', '.join(KINDS)}")
        if push.value is None:
            raise ConflictError("--release-kind", flags["release_kind"], "needs --push")
        kind = Sourced(flags["release_kind"], "flag")
    if flags.get("dryrun") and (qa.value or push.value):
        raise ConflictError("--dryrun", "true", "builds nothing to run --qa or --push on")
    tags: Sourced[ImageTags | None] = Sourced(None, "default")
    if push.value is not None:
        try:
            tags = Sourced(compute_tags(release=release, flavor=flavor, kind=kind.value,
                                        git_sha=facts.git_sha, arch=facts.arch,
                                        date=facts.date, dirty=facts.dirty),
                           "implied", "the release, flavor, kind and commit")
        except TagError as e:
            raise ConflictError("--release-kind", kind.value, str(e)) from None
    return ReleasePlan(qa_suites=qa, push=push, release_kind=kind,
                       git_sha=Sourced(facts.git_sha, "host"),
                       dirty=Sourced(facts.dirty, "host"), tags=tags)

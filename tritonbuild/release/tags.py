"""The tags a published image gets, NGC's way: pure, from a few facts of the build.

    release   24.10-vllm-python-py3[-cpu]                      moves to each release build
              latest[-cpu]                                     moves with it
    nightly   nightly[-cpu]                                    moves to each green nightly
    local     (nothing moves)                                  a developer's push
    every kind, never moved once pushed:
              24.10-vllm-python-py3[-cpu]-<sha>                 (release)
              24.10-vllm-python-py3[-cpu]-nightly.<YYYYMMDD>-<sha>   (nightly)
              24.10-vllm-python-py3[-cpu]-dev.<sha>[-dirty]     (local)
    and one per architecture, the immutable tag plus -<arch> (amd64, arm64), which a
    multi-arch manifest list would gather.

The CPU flavor carries a `-cpu` suffix, so that a CPU image can never be pulled by a GPU
tag.  A build from a tree with uncommitted changes is `local` whatever it asks for: a
release or nightly tag must name the commit it was built from.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KINDS", "ImageTags", "compute_tags", "TagError"]

KINDS = ("release", "nightly", "local")
_YYMM = re.compile(r"^\d{2}\.(0[1-9]|1[0-2])\Z")
_SHA = re.compile(r"^[0-9a-f]{7,40}\Z")
_DATE = re.compile(r"^\d{8}\Z")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
SHORT_SHA = 12


class TagError(ValueError):
    """A fact the tags are made of is missing or malformed."""


@dataclass(frozen=True)
class ImageTags:
    immutable: str                  # names this one build, for ever
    arch: str                       # the immutable tag of this architecture
    floating: tuple[str, ...]       # moved to this build when it is promoted

    @property
    def all(self) -> tuple[str, ...]:
        """Push order: the build's own tags first, the moving ones last."""
        return (self.arch, self.immutable, *self.floating)


def compute_tags(*, release: str, flavor: str, kind: str, git_sha: str, arch: str,
                 date: str | None = None, dirty: bool = False) -> ImageTags:
    """Tags for one build.  release: Triton's YY.MM; flavor: cpu or gpu; git_sha: the
    commit built; arch: the machine (x86_64 or amd64...); date: YYYYMMDD (nightly)."""
    if not _YYMM.match(release):
        raise TagError(f"release {release!r}: expected YY.MM, e.g. 24.10")
    if flavor not in ("cpu", "gpu"):
        raise TagError(f"flavor {flavor!r}: expected cpu or gpu")
    if kind not in KINDS:
        raise TagError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    if not _SHA.match(git_sha):
        raise TagError(f"git sha {git_sha!r}: expected 7 to 40 lower-case hex digits")
    if arch not in _ARCH:
        raise TagError(f"architecture {arch!r}: expected one of {', '.join(sorted(_ARCH))}")
    if dirty and kind != "local":
        raise TagError(f"a {kind} build must come from a clean tree: commit or stash the "
                       f"changes, or publish it as local")
    suffix = "-cpu" if flavor == "cpu" else ""
    base = f"{release}-vllm-python-py3{suffix}"
    sha = git_sha[:SHORT_SHA]
    if kind == "release":
        immutable, floating = f"{base}-{sha}", (base, f"latest{suffix}")
    elif kind == "nightly":
        if date is None or not _DATE.match(date):
            raise TagError(f"nightly date {date!r}: expected YYYYMMDD")
        immutable, floating = f"{base}-nightly.{date}-{sha}", (f"nightly{suffix}",)
    else:
        immutable, floating = f"{base}-dev.{sha}{'-dirty' if dirty else ''}", ()
    return ImageTags(immutable=immutable, arch=f"{immutable}-{_ARCH[arch]}", floating=floating)

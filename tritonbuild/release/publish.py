"""Publish a built image to a registry: push once, then promote by digest.

    1. `docker push` the image under its per-architecture tag: the one upload.  The
       registry's answer is the digest everything after refers to.
    2. Push the image's CycloneDX SBOM beside it, as a one-file image under the referrer
       tag `sha256-<digest>.sbom` (the tag scheme cosign and oras use where a registry
       has no referrers API), and write it to the build dir as `sbom.cdx.json`.
    3. Copy that digest (`skopeo copy --preserve-digests`, registry to registry, no
       re-upload) to the immutable tag, then to each floating tag (`24.10-...`, `latest`).
    4. Check that every tag now names the digest; write `published.json` to the build dir.

All or nothing: the floating tags' previous digests are read before any moves, and when
one move fails the ones already moved go back, so `latest` and `24.10-...` never name
different builds.  Credentials come only from the Docker config (`docker login`, or a
credential helper it names; DOCKER_CONFIG picks the folder): no flag or build argument
carries one.  A registry on loopback (127.0.0.0/8, localhost) is reached over plain
HTTP, as Docker itself does.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import TritonBuildError
from ..hostenv import docker_binary
from .tags import ImageTags

__all__ = ["Target", "parse_target", "Registry", "DockerSkopeo", "publish", "PublishError",
           "CredentialsError", "Published"]

_REPO = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*\Z")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_DENIED = re.compile(r"unauthorized|authentication required|no basic auth credentials|"
                     r"denied|401", re.IGNORECASE)


class PublishError(TritonBuildError):
    """The push or a promotion failed; nothing moved (or what moved was put back)."""


class CredentialsError(PublishError):
    """The registry refused the credentials the Docker config holds for it."""


@dataclass(frozen=True)
class Target:
    registry: str        # host[:port]
    repository: str      # path in the registry

    def ref(self, tag: str) -> str:
        return f"{self.registry}/{self.repository}:{tag}"

    def at(self, digest: str) -> str:
        return f"{self.registry}/{self.repository}@{digest}"

    @property
    def loopback(self) -> bool:
        host = self.registry.rsplit(":", 1)[0] if self.registry.count(":") == 1 else self.registry
        return host in ("localhost", "[::1]") or host.startswith("127.")


def parse_target(value: str) -> Target:
    """REGISTRY/REPO: the registry part must look like a host (a dot, a port or
    localhost), so that `--push myrepo/x` cannot silently mean Docker Hub."""
    registry, sep, repository = value.partition("/")
    if not sep or not repository:
        raise PublishError(f"--push={value}: expected REGISTRY/REPOSITORY, e.g. "
                           f"nvcr.io/myorg/tritonserver or 127.0.0.1:5000/tritonserver")
    if not ("." in registry or ":" in registry or registry == "localhost"):
        raise PublishError(f"--push={value}: {registry!r} is not a registry host "
                           f"(expected a name with a dot or a port, or localhost)")
    if ":" in repository or "@" in repository or not _REPO.match(repository):
        raise PublishError(f"--push={value}: the repository must be lower-case path "
                           f"components, without a tag (tags are computed)")
    return Target(registry, repository)


def docker_config_file() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"


class Registry(ABC):
    """The remote side, narrow enough for a fake in unit tests."""

    @abstractmethod
    def push(self, image: str, target: Target, tag: str) -> str:
        """Upload the local image as target:tag; return the pushed manifest's digest."""

    @abstractmethod
    def digest(self, target: Target, tag: str) -> str | None:
        """The digest target:tag names now, None when the tag does not exist."""

    @abstractmethod
    def copy(self, target: Target, digest: str, tag: str) -> None:
        """Point target:tag at digest (same registry, no upload)."""

    @abstractmethod
    def push_file(self, target: Target, tag: str, name: str, data: bytes,
                  labels: dict[str, str]) -> str:
        """Push one file as a scratch image target:tag; return its digest."""


class DockerSkopeo(Registry):
    """`docker push` for the upload (the engine holds the image), skopeo for the rest."""

    def __init__(self, run: Callable[..., subprocess.CompletedProcess] = subprocess.run):
        self._run = run
        self.docker = docker_binary()

    def _call(self, argv: list[str], target: Target, what: str) -> str:
        out = self._run(argv, capture_output=True, text=True, timeout=3600)
        if out.returncode != 0:
            message = (out.stderr or out.stdout).strip().splitlines()
            last = message[-1] if message else f"exit code {out.returncode}"
            if _DENIED.search(out.stderr + out.stdout):
                raise CredentialsError(
                    f"{target.registry} refused the credentials for it in the Docker config "
                    f"({docker_config_file()}) while {what}: {last} "
                    f"(log in with `docker login {target.registry}`)")
            raise PublishError(f"{what} failed: {last}")
        return out.stdout

    def _skopeo(self, target: Target, *args: str) -> list[str]:
        argv = ["skopeo", *args]
        config = docker_config_file()
        if config.is_file():
            argv.insert(2, f"--authfile={config}")
        if target.loopback:
            flag = "--tls-verify=false" if args[0] != "copy" else None
            argv[2:2] = [flag] if flag else ["--src-tls-verify=false", "--dest-tls-verify=false"]
        return argv

    def push(self, image: str, target: Target, tag: str) -> str:
        ref = target.ref(tag)
        self._call([self.docker, "tag", image, ref], target, f"tagging {image} as {ref}")
        try:
            out = self._call([self.docker, "push", ref], target, f"pushing {ref}")
        finally:
            # The registry holds the tag now; the local alias would only be clutter.
            self._run([self.docker, "image", "rm", ref], capture_output=True)
        found = _DIGEST.findall(out)
        if not found:
            raise PublishError(f"pushing {ref}: docker push named no digest:\n{out[-500:]}")
        return found[-1]

    def digest(self, target: Target, tag: str) -> str | None:
        argv = self._skopeo(target, "inspect", "--format={{.Digest}}",
                            f"docker://{target.ref(tag)}")
        out = self._run(argv, capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            if re.search(r"manifest unknown|not found|name unknown", out.stderr, re.IGNORECASE):
                return None
            self._call(argv, target, f"reading {target.ref(tag)}")  # raises with the reason
        return out.stdout.strip() or None

    def push_file(self, target: Target, tag: str, name: str, data: bytes,
                  labels: dict[str, str]) -> str:
        dockerfile = ("FROM scratch\n" + f"COPY {name} /{name}\n"
                      + "".join(f"LABEL {k}={json.dumps(v)}\n" for k, v in labels.items()))
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            for filename, content in (("Dockerfile", dockerfile.encode()), (name, data)):
                info = tarfile.TarInfo(filename)
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
        local = f"tritonbuild-file:{tag}"
        out = self._run([self.docker, "build", "-q", "-t", local, "-"], input=context.getvalue(),
                        capture_output=True, timeout=600)
        if out.returncode != 0:
            raise PublishError(f"packing {name} failed: {out.stderr.decode(errors='replace')}")
        try:
            return self.push(local, target, tag)
        finally:
            self._run([self.docker, "image", "rm", local], capture_output=True)

    def copy(self, target: Target, digest: str, tag: str) -> None:
        self._call(self._skopeo(target, "copy", "--preserve-digests",
                                f"docker://{target.at(digest)}", f"docker://{target.ref(tag)}"),
                   target, f"tagging {target.at(digest)} as {tag}")


SBOM_FILE = "sbom.cdx.json"


def sbom_tag(digest: str) -> str:
    return digest.replace(":", "-") + ".sbom"


@dataclass(frozen=True)
class Published:
    target: Target
    digest: str
    tags: tuple[str, ...]
    sbom_tag: str | None = None
    sbom_digest: str | None = None

    def to_json(self) -> str:
        return json.dumps({
            "repository": f"{self.target.registry}/{self.target.repository}",
            "digest": self.digest,
            "reference": self.target.at(self.digest),
            "tags": list(self.tags),
            "sbom": ({"tag": self.sbom_tag, "digest": self.sbom_digest, "file": SBOM_FILE}
                     if self.sbom_tag else None),
        }, indent=2) + "\n"


def publish(image: str, target: Target, tags: ImageTags, registry: Registry,
            build_dir: Path | None = None, say: Callable[[str], None] = lambda _: None,
            sbom: bytes | None = None) -> Published:
    say(f"pushing {image} as {target.ref(tags.arch)}")
    digest = registry.push(image, target, tags.arch)
    sbom_digest = None
    if sbom is not None:
        if build_dir is not None:
            build_dir.mkdir(parents=True, exist_ok=True)
            (build_dir / SBOM_FILE).write_bytes(sbom)
        say(f"pushing its SBOM as {target.ref(sbom_tag(digest))}")
        sbom_digest = registry.push_file(target, sbom_tag(digest), SBOM_FILE, sbom, {
            "org.opencontainers.image.description": "CycloneDX SBOM",
            "io.triton-vllm.sbom-of": target.at(digest)})
    for tag in (tags.immutable,):
        registry.copy(target, digest, tag)
    previous = {tag: registry.digest(target, tag) for tag in tags.floating}
    moved: list[str] = []
    try:
        for tag in tags.floating:
            say(f"promoting {target.at(digest)} to :{tag}")
            registry.copy(target, digest, tag)
            moved.append(tag)
    except PublishError as e:
        undone = []
        for tag in moved:
            if previous[tag] is not None:
                registry.copy(target, previous[tag], tag)
                undone.append(tag)
        raise PublishError(f"{e}; the floating tags were left as they were"
                           + (f" ({', '.join(undone)} moved back)" if undone else "")) from e
    wrong = {tag: found for tag in tags.all if (found := registry.digest(target, tag)) != digest}
    if wrong:
        raise PublishError(f"after the push, tags name other digests than {digest}: {wrong}")
    result = Published(target, digest, tags.all,
                       sbom_tag(digest) if sbom is not None else None, sbom_digest)
    if build_dir is not None:
        build_dir.mkdir(parents=True, exist_ok=True)
        (build_dir / "published.json").write_text(result.to_json())
    return result

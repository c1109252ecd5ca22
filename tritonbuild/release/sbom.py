"""A CycloneDX SBOM of an image: its Debian packages and its Python distributions.

Read from the image's filesystem (`docker export` of a created, never started container),
so it needs nothing inside the image: dpkg's status file gives the Debian packages, every
`*.dist-info/METADATA` (or `*.egg-info/PKG-INFO`) the Python ones, each with a purl.

    components = read_filesystem(tar_stream)      # from `docker export`
    bom = cyclonedx(image="...", image_id="sha256:...", components=components)
"""
from __future__ import annotations

import datetime
import json
import re
import subprocess
import tarfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import IO

from ..hostenv import docker_binary

__all__ = ["Component", "read_filesystem", "cyclonedx", "image_sbom", "SPEC_VERSION"]

SPEC_VERSION = "1.5"
_DIST_INFO = re.compile(r"(^|/)site-packages/[^/]+\.(dist-info/METADATA|egg-info/PKG-INFO)$")


@dataclass(frozen=True, order=True)
class Component:
    kind: str        # "deb" or "pypi"
    name: str
    version: str
    arch: str = ""
    location: str = ""   # where a Python distribution was found

    @property
    def purl(self) -> str:
        if self.kind == "deb":
            return f"pkg:deb/debian/{self.name}@{self.version}" + (
                f"?arch={self.arch}" if self.arch else "")
        name = re.sub(r"[-_.]+", "-", self.name).lower()
        return f"pkg:pypi/{name}@{self.version}"


def parse_dpkg_status(text: str) -> list[Component]:
    out = []
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.MULTILINE))
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            out.append(Component("deb", fields["Package"], fields.get("Version", ""),
                                 fields.get("Architecture", "")))
    return out


def read_filesystem(stream: IO[bytes]) -> list[Component]:
    """Components of a root filesystem given as a tar stream."""
    found: set[Component] = set()
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            name = member.name.lstrip("./")
            if not member.isfile():
                continue
            if name == "var/lib/dpkg/status":
                text = archive.extractfile(member).read().decode("utf-8", "replace")
                found.update(parse_dpkg_status(text))
            elif _DIST_INFO.search(name):
                headers = HeaderParser().parsestr(
                    archive.extractfile(member).read().decode("utf-8", "replace"),
                    headersonly=True)
                if headers.get("Name") and headers.get("Version"):
                    found.add(Component("pypi", headers["Name"], headers["Version"],
                                        location="/" + name.split("/site-packages/")[0]
                                        + "/site-packages"))
    return sorted(found)


def cyclonedx(*, image: str, image_id: str, components: Iterable[Component],
              timestamp: str | None = None, serial: str | None = None) -> dict:
    items = []
    for c in components:
        item = {"type": "library", "bom-ref": f"{c.purl}#{c.location}" if c.location else c.purl,
                "name": c.name, "version": c.version, "purl": c.purl}
        if c.location:
            item["properties"] = [{"name": "io.triton-vllm:location", "value": c.location}]
        items.append(item)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": serial or f"urn:uuid:{uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": timestamp or datetime.datetime.now(datetime.UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "tritonbuild"}]},
            "component": {"type": "container", "bom-ref": image_id, "name": image,
                          "version": image_id},
        },
        "components": items,
    }


def image_sbom(image: str) -> dict:
    """The SBOM of a local image, from its exported filesystem."""
    docker = docker_binary()
    image_id = subprocess.run([docker, "image", "inspect", "-f", "{{.Id}}", image],
                              capture_output=True, text=True, check=True).stdout.strip()
    cid = subprocess.run([docker, "create", image], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        export = subprocess.Popen([docker, "export", cid], stdout=subprocess.PIPE)
        try:
            components = read_filesystem(export.stdout)
        finally:
            export.stdout.close()
            export.wait()
    finally:
        subprocess.run([docker, "rm", "-f", cid], capture_output=True)
    return cyclonedx(image=image, image_id=image_id, components=components)


def dumps(bom: dict) -> bytes:
    return (json.dumps(bom, indent=2) + "\n").encode()

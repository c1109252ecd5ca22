"""Facts about the machine that running build.py on it supplies as defaults.

Kept apart from validation so that tests hand validate.py a fixed HostFacts and the
plan never depends on the machine the tests happen to run on.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HostFacts", "discover", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True)
class HostFacts:
    repo_root: Path
    # The CA bundle the host's pip trusts and where that was found (handed to the build as
    # a secret, since pip inside the build must trust the same proxy or index).
    pip_cert: Path | None
    pip_cert_origin: str
    # The host pip's local wheel folder (find-links), and where that was found.
    find_links: Path | None
    find_links_origin: str


def _pip_config(key: str) -> str | None:
    # pip itself knows its configuration files best; ask it instead of parsing them.
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "get", key],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value else None


def _first_dir(value: str | None) -> Path | None:
    for item in (value or "").split():
        path = Path(item.removeprefix("file://"))
        if path.is_dir():
            return path
    return None


def discover(repo_root: Path = REPO_ROOT) -> HostFacts:
    cert, cert_origin = None, "none found"
    for origin, value in (("PIP_CERT", os.environ.get("PIP_CERT")),
                          ("pip config global.cert", _pip_config("global.cert")),
                          ("the system CA bundle", str(DEFAULT_CA_BUNDLE))):
        if value and Path(value).is_file():
            cert, cert_origin = Path(value), origin
            break
    links, links_origin = None, "none found"
    for origin, value in (("PIP_FIND_LINKS", os.environ.get("PIP_FIND_LINKS")),
                          ("pip config global.find-links", _pip_config("global.find-links"))):
        found = _first_dir(value)
        if found:
            links, links_origin = found, origin
            break
    return HostFacts(repo_root, cert, cert_origin, links, links_origin)


def docker_binary() -> str:
    # Debian's client: the one whose built-in BuildKit works without a buildx plugin.
    return os.environ.get("TVB_DOCKER") or ("/usr/bin/docker" if Path("/usr/bin/docker").exists()
                                            else shutil.which("docker") or "docker")

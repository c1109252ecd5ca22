"""Shared fixtures of the end-to-end suites (pytest's `pythonpath` puts the repository
root on sys.path, so suites import `qa.common` and the repository's packages from the
checkout)."""

import os
from pathlib import Path

import pytest

from qa.common.models import tiny_model_path
from qa.common.passes import in_image_pass

REPO = Path(__file__).resolve().parents[1]


@pytest.hookimpl(tryfirst=True)  # before -m selects by these marks
def pytest_collection_modifyitems(config, items):
    """Mark the image pass's suites `image_pass` (run_tests.sh's host pass leaves them out),
    and skip `host_mode` tests when the suites run against an image."""
    image = os.environ.get("TVB_IMAGE")
    for item in items:
        try:
            relative = Path(str(item.path)).resolve().relative_to(REPO).as_posix()
        except ValueError:
            continue
        if in_image_pass(relative):
            item.add_marker(pytest.mark.image_pass)
        if image and item.get_closest_marker("host_mode"):
            item.add_marker(pytest.mark.skip(
                reason=f"inspects a server on this host; TVB_IMAGE={image} runs it in a "
                       f"container"))


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny random Llama model (made once, cached across sessions)."""
    return tiny_model_path()

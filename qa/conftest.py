"""Shared fixtures of the end-to-end suites (pytest's `pythonpath` puts the repository
root on sys.path, so suites import `qa.common` and the repository's packages from the
checkout)."""

from pathlib import Path

import pytest

from qa.common.models import tiny_model_path


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny random Llama model (made once, cached across sessions)."""
    return tiny_model_path()

"""Shared fixtures of the end-to-end suites.

Puts the repository root on sys.path, so suites import `qa.common` (and the
repository's own packages) from the checkout.
"""

import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from qa.common.models import tiny_model_path  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny random Llama model (made once, cached across sessions)."""
    return tiny_model_path()

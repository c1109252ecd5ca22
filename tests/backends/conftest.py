"""Unit tests of the vLLM backend's pure helpers (backends/vllm/utils), without vLLM or
Triton: the backend folder goes on sys.path as Triton's Python backend puts it."""

import sys
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[2] / "backends" / "vllm"
if str(BACKEND) not in sys.path:
    sys.path.insert(0, str(BACKEND))

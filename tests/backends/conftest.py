"""Unit tests of the vLLM backend's pure helpers (backends/vllm/utils), without vLLM or
Triton: pytest's `pythonpath` puts the backend folder on sys.path as Triton's Python
backend puts it."""

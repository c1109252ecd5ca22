"""Unit tests of the vLLM backend's pure helpers (backends/vllm/triton_vllm_backend), without vLLM or
Triton: pytest's `pythonpath` puts the backend folder on sys.path as Triton's Python
backend puts it."""

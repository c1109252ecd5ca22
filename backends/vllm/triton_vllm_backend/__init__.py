"""Helpers of the vLLM backend, each with one job.

The pure ones (`io_spec`, `params`, `engine_config`, `outputs`, `lora`) import nothing
from vLLM or Triton at module level, so they are unit-tested without either.
"""

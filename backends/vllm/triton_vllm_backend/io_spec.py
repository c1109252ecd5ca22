"""The backend's inputs and outputs, as auto_complete_config adds them to a model config.

The names are the wire contract with clients such as the OpenAI frontend, which keeps its
own copy (it ships apart from this backend); tests/test_wire_contract.py reads both.
"""

from __future__ import annotations

GENERATE = "generate"
POOLING = "pooling"

# Inputs every model takes.  A prompt is text_input, or input_ids (token ids, our
# extension: a frontend that renders chat templates itself sends tokens, not text).
_PROMPT_INPUTS = [
    {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    {"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1], "optional": True},
]

_GENERATE_INPUTS = [
    {"name": "stream", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "sampling_parameters", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    {"name": "exclude_input_in_output", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_finish_reason", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_cumulative_logprob", "data_type": "TYPE_BOOL", "dims": [1],
     "optional": True},
    {"name": "return_logprobs", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_input_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_output_tokens", "data_type": "TYPE_BOOL", "dims": [1],
     "optional": True},
]

# Per-choice outputs have one element per choice (sampling parameter n).
_GENERATE_OUTPUTS = [
    {"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "finish_reason", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "cumulative_logprob", "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": "logprobs", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "num_input_tokens", "data_type": "TYPE_UINT32", "dims": [1]},
    {"name": "num_output_tokens", "data_type": "TYPE_UINT32", "dims": [-1]},
]

_POOLING_INPUTS = [
    {"name": "return_num_input_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
]

_POOLING_OUTPUTS = [
    {"name": "embedding", "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": "num_input_tokens", "data_type": "TYPE_UINT32", "dims": [1]},
]


def inputs_for(runner: str) -> list[dict]:
    extra = _POOLING_INPUTS if runner == POOLING else _GENERATE_INPUTS
    return [dict(i) for i in _PROMPT_INPUTS + extra]


def outputs_for(runner: str) -> list[dict]:
    return [dict(o) for o in (_POOLING_OUTPUTS if runner == POOLING else _GENERATE_OUTPUTS)]

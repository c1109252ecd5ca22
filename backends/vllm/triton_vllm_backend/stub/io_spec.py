"""The backend's inputs and outputs, as auto_complete_config adds them to a model config.

Their names are the wire's (wire.py); this module gives each its type and shape.
"""

from __future__ import annotations

from .wire import (
    CUMULATIVE_LOGPROB,
    EMBEDDING,
    EXCLUDE_INPUT_IN_OUTPUT,
    FINISH_REASON,
    INPUT_IDS,
    LOGPROBS,
    NUM_INPUT_TOKENS,
    NUM_OUTPUT_TOKENS,
    POOLING,
    RETURN_CUMULATIVE_LOGPROB,
    RETURN_FINISH_REASON,
    RETURN_LOGPROBS,
    RETURN_NUM_INPUT_TOKENS,
    RETURN_NUM_OUTPUT_TOKENS,
    SAMPLING_PARAMETERS,
    STREAM,
    TEXT_INPUT,
    TEXT_OUTPUT,
)


def _optional_bool(name: str) -> dict:
    return {"name": name, "data_type": "TYPE_BOOL", "dims": [1], "optional": True}


# Inputs every model takes: a prompt, as text or as token ids.
_PROMPT_INPUTS = [
    {"name": TEXT_INPUT, "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    {"name": INPUT_IDS, "data_type": "TYPE_INT64", "dims": [-1], "optional": True},
]

_GENERATE_INPUTS = [
    _optional_bool(STREAM),
    {"name": SAMPLING_PARAMETERS, "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    _optional_bool(EXCLUDE_INPUT_IN_OUTPUT),
    _optional_bool(RETURN_FINISH_REASON),
    _optional_bool(RETURN_CUMULATIVE_LOGPROB),
    _optional_bool(RETURN_LOGPROBS),
    _optional_bool(RETURN_NUM_INPUT_TOKENS),
    _optional_bool(RETURN_NUM_OUTPUT_TOKENS),
]

# Per-choice outputs have one element per choice (sampling parameter n).
_GENERATE_OUTPUTS = [
    {"name": TEXT_OUTPUT, "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": FINISH_REASON, "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": CUMULATIVE_LOGPROB, "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": LOGPROBS, "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": NUM_INPUT_TOKENS, "data_type": "TYPE_UINT32", "dims": [1]},
    {"name": NUM_OUTPUT_TOKENS, "data_type": "TYPE_UINT32", "dims": [-1]},
]

_POOLING_INPUTS = [_optional_bool(RETURN_NUM_INPUT_TOKENS)]

_POOLING_OUTPUTS = [
    {"name": EMBEDDING, "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": NUM_INPUT_TOKENS, "data_type": "TYPE_UINT32", "dims": [1]},
]


def inputs_for(runner: str) -> list[dict]:
    extra = _POOLING_INPUTS if runner == POOLING else _GENERATE_INPUTS
    return [dict(i) for i in _PROMPT_INPUTS + extra]


def outputs_for(runner: str) -> list[dict]:
    return [dict(o) for o in (_POOLING_OUTPUTS if runner == POOLING else _GENERATE_OUTPUTS)]

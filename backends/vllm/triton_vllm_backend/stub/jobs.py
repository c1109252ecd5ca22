"""What a request asks for, read from its tensors at once: a GenerateJob or an EmbedJob.

The Python backend's input tensors are valid only inside `execute()`, so everything a
request says is copied out here, before the request is handed to the engine's loop.
Pure: `read_*` take a function that returns an input tensor's numpy array (or None).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .outputs import Wanted
from .wire import (
    EXCLUDE_INPUT_IN_OUTPUT,
    INPUT_IDS,
    RETURN_CUMULATIVE_LOGPROB,
    RETURN_FINISH_REASON,
    RETURN_LOGPROBS,
    RETURN_NUM_INPUT_TOKENS,
    RETURN_NUM_OUTPUT_TOKENS,
    SAMPLING_PARAMETERS,
    STREAM,
    TEXT_INPUT,
)

InputGetter = Callable[[str], "np.ndarray | None"]


@dataclass(frozen=True)
class EmbedJob:
    id: str  # this backend's id for the request in vLLM, unique
    client_id: str  # the Triton request id the client chose ("" when none), for aborts
    prompt: dict  # vLLM's prompt: {"prompt": text} or {"prompt_token_ids": [...]}
    wanted: Wanted


@dataclass(frozen=True)
class GenerateJob(EmbedJob):
    sampling: Any  # vLLM's SamplingParams
    lora_request: Any  # vLLM's LoRARequest, or None
    stream: bool
    exclude_input: bool  # leave the prompt out of a complete answer's text
    priority: int = 0  # vLLM's scheduling priority (lower runs first)
    delivery: Any = None  # feed.Delivery: the stream's text goes out on a feed


@dataclass(frozen=True)
class GenerateInputs:
    """The generation switches, before the sampling parameters become vLLM's."""
    stream: bool
    sampling_parameters: str | bytes | None  # JSON
    exclude_input: bool


def new_id(client_id: str = "") -> str:
    """vLLM's id for a request: unique, and led by the Triton request id the client chose,
    so that vLLM's log lines (`enable_log_requests` in model.json) and this backend's
    name the id the client, Triton and the OpenAI frontend know it by."""
    suffix = uuid.uuid4().hex
    return f"{client_id}-{suffix[:12]}" if client_id else suffix


def flag(get: InputGetter, name: str, default: bool = False) -> bool:
    value = get(name)
    return default if value is None else bool(value.reshape(-1)[0])


def read_prompt(get: InputGetter) -> dict:
    ids = get(INPUT_IDS)
    if ids is not None and ids.size:
        return {"prompt_token_ids": [int(t) for t in ids.reshape(-1)]}
    text = get(TEXT_INPUT)
    if text is None:
        raise ValueError(f"the request needs {TEXT_INPUT} or {INPUT_IDS}")
    value = text.reshape(-1)[0]
    return {"prompt": value.decode("utf-8") if isinstance(value, bytes) else str(value)}


def read_wanted(get: InputGetter) -> Wanted:
    return Wanted(
        finish_reason=flag(get, RETURN_FINISH_REASON),
        cumulative_logprob=flag(get, RETURN_CUMULATIVE_LOGPROB),
        logprobs=flag(get, RETURN_LOGPROBS),
        num_input_tokens=flag(get, RETURN_NUM_INPUT_TOKENS),
        num_output_tokens=flag(get, RETURN_NUM_OUTPUT_TOKENS),
    )


def read_generate_inputs(get: InputGetter, parameters: Callable[[], str | None]) -> GenerateInputs:
    """`parameters` returns the request's parameters (JSON), read only when needed."""
    stream = flag(get, STREAM)
    sampling = get(SAMPLING_PARAMETERS)
    if sampling is not None:
        raw = sampling.reshape(-1)[0]
    else:
        # As Triton's own vLLM backend: without the input, the request's parameters
        # (`"parameters": {...}` on the generate endpoint) are the sampling parameters.
        raw = parameters() or None
    # As Triton's own vLLM backend: a complete (non-streamed) answer repeats the prompt
    # unless the client excludes it; streamed answers never do.
    exclude = flag(get, EXCLUDE_INPUT_IN_OUTPUT) or stream
    return GenerateInputs(stream, raw, exclude)

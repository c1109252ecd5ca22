"""The names this frontend and the vLLM backend exchange: tensors, parameters, keys,
and the kinds of the backend's errors.

The backend ships apart from this package, so the frontend cannot import them from it;
the backend's half is one module too (`backends/vllm/triton_vllm_backend/stub/wire.py`),
and `tests/test_wire_contract.py` reads both sides and fails when they disagree.

Error kinds.  Triton passes a decoupled model's error on as text alone: an `{"error":
...}` event or body of its generate endpoints (a 400 whatever the error's code) and the
`error_message` of a gRPC stream (no code at all).  So the backend leads every
error's text with its kind in brackets, which a person reading the message understands
too:

    [invalid_argument] sampling parameter 'max_tokens' must be an integer, got 'many'

and the frontend reads the kind (`read_error_kind`), never the wording.
"""

from __future__ import annotations

import re

# --- model discovery: model config parameters that describe a model to clients -------
MODEL_PARAMETER = "vllm_model"  # the model's folder (or hub id): its tokenizer
RUNNER_PARAMETER = "vllm_runner"  # GENERATE or POOLING
MAX_MODEL_LEN_PARAMETER = "vllm_max_model_len"
LORA_NAMES_PARAMETER = "vllm_lora_names"  # the served adapters, comma separated
GENERATE = "generate"
POOLING = "pooling"

# --- abort: a request whose parameter of this name holds the Triton id to stop -------
ABORT_PARAMETER = "vllm_abort_request_id"

# --- feeds: every stream of a model on one request, events encoded by the backend -----
# (the backend's feed.py).  A request with FEED_OPEN_PARAMETER = a feed's id (32 hex
# digits) opens it; a streaming request with FEED_PARAMETER, FEED_KEY_PARAMETER and
# FEED_EVENT_PARAMETER (JSON: the text before an event's text, between it and the finish
# reason, and after) goes out on it as records of text_output: key, then FEED_DATA + an
# event's bytes, or FEED_END + JSON of the finish reason and token counts.
FEED_OPEN_PARAMETER = "vllm_feed_open"
FEED_PARAMETER = "vllm_feed"
FEED_KEY_PARAMETER = "vllm_feed_key"
FEED_EVENT_PARAMETER = "vllm_feed_event"
FEED_DATA = b"d"
FEED_END = b"e"

# --- health: a request whose parameter of this name is true generates nothing ----------
# The model answers it at once: an empty final response while its engine runs, an error
# of kind ENGINE_DEAD once the engine died (the backend's health.py).  The kind, never the
# words, is what tells a dead engine from a model that is unavailable for a while
# (unloading, UNAVAILABLE).  DEAD_PHRASE ends a dead engine's message, for people.
HEALTH_PARAMETER = "vllm_health_check"
DEAD_PHRASE = "cannot serve it until it is restarted"

# --- errors: the kind that leads the text of each error the backend sends ------------
# The request's fault: a bad sampling parameter, an unknown LoRA adapter, a prompt longer
# than the context, anything vLLM's validation refuses.
INVALID_ARGUMENT = "invalid_argument"
# The model cannot serve now (it is unloading): retry, elsewhere.
UNAVAILABLE = "unavailable"
# The model's engine died: unavailable as above, and for good until the server restarts.
ENGINE_DEAD = "engine_dead"
# Anything else that failed in the backend or in vLLM.
INTERNAL = "internal"
ERROR_KINDS = frozenset({INVALID_ARGUMENT, UNAVAILABLE, ENGINE_DEAD, INTERNAL})

_KIND_TAG = re.compile(r"\[(" + "|".join(sorted(ERROR_KINDS)) + r")\] ")


def read_error_kind(message: str) -> tuple[str | None, str]:
    """An error's kind and its text without the tag; (None, message) for an error that
    the backend did not send (Triton's own).  The tag is looked for anywhere, in case a
    transport puts words of its own before the model's."""
    tag = _KIND_TAG.search(message)
    if tag is None:
        return None, message
    return tag.group(1), message[:tag.start()] + message[tag.end():]

# --- sampling_parameters keys beyond vLLM's SamplingParams fields ---------------------
LORA_NAME = "lora_name"
STRUCTURED_OUTPUTS = "structured_outputs"
# vLLM's scheduling priority; the backend refuses it (an invalid argument, so 400)
# unless the model's model.json sets "scheduling_policy": "priority".
PRIORITY = "priority"
# `structured_outputs` holds exactly one constraint, and options for enforcing it.
STRUCTURED_CONSTRAINTS = frozenset({"json", "regex", "choice", "grammar", "json_object",
                                    "structural_tag"})
STRUCTURED_OPTIONS = frozenset({"disable_any_whitespace", "disable_additional_properties",
                                "whitespace_pattern"})

# --- input tensors --------------------------------------------------------------------
TEXT_INPUT = "text_input"
INPUT_IDS = "input_ids"
STREAM = "stream"
SAMPLING_PARAMETERS = "sampling_parameters"
EXCLUDE_INPUT_IN_OUTPUT = "exclude_input_in_output"
RETURN_FINISH_REASON = "return_finish_reason"
RETURN_LOGPROBS = "return_logprobs"
RETURN_NUM_INPUT_TOKENS = "return_num_input_tokens"
RETURN_NUM_OUTPUT_TOKENS = "return_num_output_tokens"

# --- output tensors -------------------------------------------------------------------
TEXT_OUTPUT = "text_output"
FINISH_REASON = "finish_reason"
LOGPROBS = "logprobs"
NUM_INPUT_TOKENS = "num_input_tokens"
NUM_OUTPUT_TOKENS = "num_output_tokens"
EMBEDDING = "embedding"

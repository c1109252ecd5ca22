"""The backend's half of its wire contract with clients: every tensor, parameter, key and
error kind that travels between this backend and a client such as the OpenAI frontend.

Each is defined here once, and the modules that read or write it import it from here.
The frontend ships apart from this backend and keeps its own half
(`triton_openai/triton/vllm_contract.py`); `tests/test_wire_contract.py` checks the two,
field by field.

Only the standard library: the image's model watch (`watch.py`) imports it beside a
server that is loading, and the stub's modules that import it are unit-tested without
Triton or vLLM.
"""

from __future__ import annotations

import re

# --- runners: what a model does, the value of RUNNER_PARAMETER -----------------------
GENERATE = "generate"
POOLING = "pooling"

# --- input tensors (io_spec.py declares their types) ---------------------------------
# A prompt is TEXT_INPUT, or INPUT_IDS (token ids: a client that renders chat templates
# itself sends tokens, not text).
TEXT_INPUT = "text_input"
INPUT_IDS = "input_ids"
STREAM = "stream"
SAMPLING_PARAMETERS = "sampling_parameters"
EXCLUDE_INPUT_IN_OUTPUT = "exclude_input_in_output"
RETURN_FINISH_REASON = "return_finish_reason"
RETURN_CUMULATIVE_LOGPROB = "return_cumulative_logprob"
RETURN_LOGPROBS = "return_logprobs"
RETURN_NUM_INPUT_TOKENS = "return_num_input_tokens"
RETURN_NUM_OUTPUT_TOKENS = "return_num_output_tokens"

# --- output tensors --------------------------------------------------------------------
TEXT_OUTPUT = "text_output"
FINISH_REASON = "finish_reason"
CUMULATIVE_LOGPROB = "cumulative_logprob"
LOGPROBS = "logprobs"
NUM_INPUT_TOKENS = "num_input_tokens"
NUM_OUTPUT_TOKENS = "num_output_tokens"
EMBEDDING = "embedding"

# --- model discovery: config.pbtxt parameters that describe a model to clients --------
MODEL_PARAMETER = "vllm_model"  # the model's folder (or hub id): its tokenizer
RUNNER_PARAMETER = "vllm_runner"  # GENERATE or POOLING
MAX_MODEL_LEN_PARAMETER = "vllm_max_model_len"
LORA_NAMES_PARAMETER = "vllm_lora_names"  # the served LoRA adapters, comma separated

# --- sampling_parameters keys beyond vLLM's SamplingParams fields (params.py) ---------
LORA_NAME = "lora_name"
STRUCTURED_OUTPUTS = "structured_outputs"
# vLLM's scheduling priority (lower runs first); only for a model whose model.json sets
# "scheduling_policy": "priority".
PRIORITY = "priority"
# `structured_outputs` holds one constraint, and options that tune how it is enforced
# (vLLM's StructuredOutputsParams fields).
STRUCTURED_CONSTRAINTS = frozenset({"json", "regex", "choice", "grammar", "json_object",
                                    "structural_tag"})
STRUCTURED_OPTIONS = frozenset({"disable_any_whitespace", "disable_additional_properties",
                                "whitespace_pattern"})

# --- request parameters that make a request something else than a generation ---------
# Abort: the Triton request id whose running requests to stop (abort.py).
ABORT_PARAMETER = "vllm_abort_request_id"
# Health check: true asks the model whether its engine runs, and generates nothing
# (health.py).
HEALTH_PARAMETER = "vllm_health_check"

# --- feeds: every stream of a client on one request (feed.py) --------------------------
FEED_OPEN_PARAMETER = "vllm_feed_open"
FEED_PARAMETER = "vllm_feed"
FEED_KEY_PARAMETER = "vllm_feed_key"
FEED_EVENT_PARAMETER = "vllm_feed_event"
# What leads each record: an event's bytes, or the end of a request.  The end record is
# JSON whose keys are the output tensors' names FINISH_REASON, NUM_INPUT_TOKENS and
# NUM_OUTPUT_TOKENS.
FEED_DATA = b"d"
FEED_END = b"e"

# --- error kinds: the kind that leads the text of each error the backend answers ------
# Triton passes a decoupled model's error on as text alone (its generate endpoints send
# any model error as a 400, a gRPC stream's error_message has no code), so the kind
# leads the text in brackets, which a person reading the message understands too:
#
#     [invalid_argument] sampling parameter 'max_tokens' must be an integer, got 'many'
#
# and clients read the kind, never the wording.
#
# The request's fault: a bad sampling parameter, an unknown LoRA adapter, a prompt
# longer than the model's context, anything vLLM's validation refuses.
INVALID_ARGUMENT = "invalid_argument"
# The model cannot serve now (it is unloading): the server's fault, and a retry
# elsewhere may succeed.
UNAVAILABLE = "unavailable"
# The model's engine died, and the model cannot serve again until the server restarts
# (health.py): unavailable as above, and final, which is what watches act on.
ENGINE_DEAD = "engine_dead"
# Anything else that failed in the backend or in vLLM.
INTERNAL = "internal"
ERROR_KINDS = frozenset({INVALID_ARGUMENT, UNAVAILABLE, ENGINE_DEAD, INTERNAL})

# The words a dead engine's error ends with, for the people who read it; clients tell a
# dead engine by its kind, ENGINE_DEAD.
DEAD_PHRASE = "cannot serve it until it is restarted"

# Triton's own words (not this backend's) for a model whose Python-backend stub process
# died: "Stub process '<model>_0_0' is not healthy."  Triton's errors carry no kind, so
# only these words tell it.
STUB_NOT_HEALTHY = "is not healthy"

_KIND_TAG = re.compile(r"\[(" + "|".join(sorted(ERROR_KINDS)) + r")\] ")


def tagged(kind: str, message: str) -> str:
    """An error's text as it goes on the wire: its kind in brackets, then the message."""
    if kind not in ERROR_KINDS:
        raise ValueError(f"not an error kind: {kind!r} (one of {sorted(ERROR_KINDS)})")
    return f"[{kind}] {message}"


def kind_of(text: str) -> str | None:
    """The kind of an error's text as it arrives, or None for an error this backend did
    not send (Triton's own).  Looked for anywhere, in case a transport put words of its
    own before the model's."""
    tag = _KIND_TAG.search(text)
    return None if tag is None else tag.group(1)

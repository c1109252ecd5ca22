"""The names this frontend and the vLLM backend exchange: tensors, parameters, keys.

The backend (`backends/vllm/triton_vllm_backend`) ships apart from this package, so the
frontend cannot import them from it; `tests/test_wire_contract.py` reads both sides and
fails when they disagree.
"""

from __future__ import annotations

# --- model discovery: model config parameters that describe a model to clients -------
MODEL_PARAMETER = "vllm_model"  # the model's folder (or hub id): its tokenizer
RUNNER_PARAMETER = "vllm_runner"  # GENERATE or POOLING
MAX_MODEL_LEN_PARAMETER = "vllm_max_model_len"
LORA_NAMES_PARAMETER = "vllm_lora_names"  # the served adapters, comma separated
GENERATE = "generate"
POOLING = "pooling"

# --- abort: a request whose parameter of this name holds the Triton id to stop -------
ABORT_PARAMETER = "vllm_abort_request_id"

# --- health: the phrase in the backend's errors once a model's engine died ------------
# (health.py's DEAD_PHRASE); Triton's own for a dead Python-backend stub.
ENGINE_DEAD_PHRASE = "cannot serve it until it is restarted"
STUB_DEAD_PHRASE = "is not healthy"

# --- sampling_parameters keys beyond vLLM's SamplingParams fields ---------------------
LORA_NAME = "lora_name"
STRUCTURED_OUTPUTS = "structured_outputs"
# vLLM's scheduling priority; the backend refuses it (an "invalid" parameter, so 400)
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

"""Turn a request's `sampling_parameters` JSON into keyword arguments for vLLM.

Clients (Triton's generate endpoint, perf tools) often send every value as a string, so
values are coerced to the type of the SamplingParams field they set.  Anything that
cannot be coerced, and any unknown key, is a `ParameterError` naming the key: the request
gets that message, the model stays healthy.
"""

from __future__ import annotations

import json
from typing import Any

# The keys that are ours, not SamplingParams fields (LORA_NAME, STRUCTURED_OUTPUTS,
# PRIORITY), are the wire's: clients send them.
from .wire import (
    LORA_NAME,
    PRIORITY,
    STRUCTURED_CONSTRAINTS,
    STRUCTURED_OPTIONS,
    STRUCTURED_OUTPUTS,
)

# Accepted for compatibility and ignored: the backend decides streaming from `stream`.
IGNORED = {"stream"}

_INT = {"n", "best_of", "top_k", "seed", "max_tokens", "min_tokens", "logprobs",
        "prompt_logprobs", "truncate_prompt_tokens"}
_FLOAT = {"presence_penalty", "frequency_penalty", "repetition_penalty", "temperature",
          "top_p", "min_p", "length_penalty"}
_BOOL = {"ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
         "include_stop_str_in_output", "detokenize"}
_STR_LIST = {"stop", "bad_words"}
_INT_LIST = {"stop_token_ids", "allowed_token_ids"}
STRUCTURED_KEYS = STRUCTURED_CONSTRAINTS | STRUCTURED_OPTIONS

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def request_parameters(raw: str | dict | None) -> dict:
    """A Triton request's parameters as a mapping: the HTTP frontend hands them to the
    stub as a JSON string, a test or another caller as a dict; {} when there are none or
    they are not a JSON object."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return {}
    return raw if isinstance(raw, dict) else {}


class ParameterError(ValueError):
    """A sampling parameter the request cannot use."""


def _to_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ParameterError(f"sampling parameter '{key}' must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ParameterError(f"sampling parameter '{key}' must be an integer, got {value!r}")


def _to_float(key: str, value: Any) -> float:
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ParameterError(f"sampling parameter '{key}' must be a number, got {value!r}")


def _to_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ParameterError(f"sampling parameter '{key}' must be true or false, got {value!r}")


def _maybe_json(value: Any) -> Any:
    """Lists and objects may arrive JSON-encoded in a string."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _to_str_list(key: str, value: Any) -> list[str]:
    value = _maybe_json(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ParameterError(f"sampling parameter '{key}' must be a string or a list of strings")


def _to_int_list(key: str, value: Any) -> list[int]:
    value = _maybe_json(value)
    if isinstance(value, list):
        return [_to_int(key, v) for v in value]
    raise ParameterError(f"sampling parameter '{key}' must be a list of integers")


def _structured(value: Any) -> dict:
    value = _maybe_json(value)
    if not isinstance(value, dict):
        raise ParameterError("sampling parameter 'structured_outputs' must be an object")
    unknown = sorted(set(value) - STRUCTURED_KEYS)
    if unknown:
        raise ParameterError(
            f"unknown key '{unknown[0]}' in 'structured_outputs' "
            f"(known: {', '.join(sorted(STRUCTURED_KEYS))})")
    out = dict(value)
    if "json" in out:
        out["json"] = _maybe_json(out["json"])
    if "choice" in out:
        out["choice"] = _to_str_list("structured_outputs.choice", out["choice"])
    for flag in ("json_object", "disable_any_whitespace", "disable_additional_properties"):
        if flag in out:
            out[flag] = _to_bool(f"structured_outputs.{flag}", out[flag])
    return out


def check_priority(priority: int, enabled: bool) -> None:
    if priority and not enabled:
        raise ParameterError(
            "invalid sampling parameter 'priority': this model does not schedule by priority "
            "(its model.json would set \"scheduling_policy\": \"priority\")")


def parse_sampling_parameters(text: str | bytes | None, known_fields: set[str]) -> dict:
    """Parse and coerce sampling parameters.

    Returns a dict of SamplingParams keyword arguments; `lora_name` (a string),
    `structured_outputs` (a dict for StructuredOutputsParams) and `priority` (an int) are
    left in it for the caller.  `known_fields` are the SamplingParams field names (passed in, so this module
    needs no vLLM).
    """
    if text is None:
        return {}
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParameterError(f"sampling_parameters is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ParameterError("sampling_parameters must be a JSON object")

    params: dict[str, Any] = {}
    for key, value in raw.items():
        if key in IGNORED:
            continue
        if value is None:
            # An explicit null max_tokens asks for as many tokens as the context allows
            # (vLLM's None), not for vLLM's default of 16; other nulls mean "default".
            if key == "max_tokens":
                params[key] = None
            continue
        if key == LORA_NAME:
            if not isinstance(value, str) or not value:
                raise ParameterError("sampling parameter 'lora_name' must be a non-empty string")
            params[key] = value
        elif key == STRUCTURED_OUTPUTS:
            params[key] = _structured(value)
        elif key == PRIORITY:
            params[key] = _to_int(key, value)
        elif key in _INT:
            params[key] = _to_int(key, value)
        elif key in _FLOAT:
            params[key] = _to_float(key, value)
        elif key in _BOOL:
            params[key] = _to_bool(key, value)
        elif key in _STR_LIST:
            params[key] = _to_str_list(key, value)
        elif key in _INT_LIST:
            params[key] = _to_int_list(key, value)
        elif key == "logit_bias":
            value = _maybe_json(value)
            if not isinstance(value, dict):
                raise ParameterError("sampling parameter 'logit_bias' must be an object")
            params[key] = {_to_int(key, k): _to_float(key, v) for k, v in value.items()}
        elif key in known_fields and not key.startswith("_"):
            params[key] = _maybe_json(value)
        else:
            raise ParameterError(f"unknown sampling parameter '{key}'")
    return params

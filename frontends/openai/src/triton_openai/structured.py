"""Structured-output constraints for vLLM's StructuredOutputsParams."""

from __future__ import annotations

from typing import Any

from .errors import BadRequestError
from .triton.vllm_contract import STRUCTURED_CONSTRAINTS, STRUCTURED_OPTIONS


def validate_structured_outputs(value: dict[str, Any], param: str = "structured_outputs") -> dict:
    keys = set(value) & STRUCTURED_CONSTRAINTS
    if len(keys) != 1:
        raise BadRequestError(
            f"{param} needs exactly one of {sorted(STRUCTURED_CONSTRAINTS)}", param=param)
    return {k: v for k, v in value.items()
            if k in STRUCTURED_CONSTRAINTS or k in STRUCTURED_OPTIONS}


def from_response_format(fmt: dict | None) -> dict | None:
    """OpenAI's response_format as a structured-outputs constraint (None for plain text)."""
    if not fmt:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"json_object": True}
    if kind == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema", spec.get("json_schema"))
        if not isinstance(schema, dict):
            raise BadRequestError("response_format.json_schema.schema must be a JSON schema object",
                                  param="response_format.json_schema.schema")
        return {"json": schema}
    raise BadRequestError(
        f"response_format.type must be text, json_object or json_schema, not {kind!r}",
        param="response_format.type")

"""Structured-output constraints for vLLM's StructuredOutputsParams: the endpoints turn
their answer formats into one here, and the generation service combines it with the
`structured_outputs` extension."""

from __future__ import annotations

from typing import Any

from ..triton.vllm_contract import STRUCTURED_CONSTRAINTS, STRUCTURED_OPTIONS
from ..web.errors import BadRequestError


def validate_structured_outputs(value: dict[str, Any], param: str = "structured_outputs") -> dict:
    keys = set(value) & STRUCTURED_CONSTRAINTS
    if len(keys) != 1:
        raise BadRequestError(
            f"{param} needs exactly one of {sorted(STRUCTURED_CONSTRAINTS)}", param=param)
    return {k: v for k, v in value.items()
            if k in STRUCTURED_CONSTRAINTS or k in STRUCTURED_OPTIONS}


def combine(constraint: dict | None, structured_outputs: dict[str, Any] | None,
            compact_json: bool = False) -> dict | None:
    """The one structured-outputs constraint a request sends to the backend.

    `constraint` comes from the OpenAI fields (forced tool calls, response_format); the
    request's vLLM `structured_outputs` may give the constraint instead, or only options
    for it (`{"disable_any_whitespace": true}` with a response_format).  With
    `compact_json` (the server-wide default), JSON constraints leave out free whitespace
    unless the request says `disable_any_whitespace: false`.
    """
    options: dict[str, Any] = {}
    if structured_outputs:
        if constraint is None or set(structured_outputs) & STRUCTURED_CONSTRAINTS:
            if constraint is not None:
                raise BadRequestError("structured_outputs cannot add a second constraint to "
                                      "response_format or tool_choice", param="structured_outputs")
            constraint = validate_structured_outputs(structured_outputs)
        options = {k: v for k, v in structured_outputs.items() if k in STRUCTURED_OPTIONS}
    if constraint is None:
        return None
    out = {**constraint, **options}
    if compact_json and ("json" in out or "json_object" in out):
        out.setdefault("disable_any_whitespace", True)
    return out


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

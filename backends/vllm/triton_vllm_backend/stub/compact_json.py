"""Compact JSON per request: no free whitespace between the tokens of a JSON answer.

vLLM takes `disable_any_whitespace` only engine-wide (`structured_outputs_config` in
model.json); its structured-output backends ignore the per-request flag.  A request that
asks for it on an engine that allows whitespace gets its JSON schema turned into the
equivalent grammar without whitespace (xgrammar writes it), which vLLM enforces per
request.  Free whitespace matters: a weak model can spend its whole token budget on
newlines and never close the object.
"""

from __future__ import annotations

import json
from typing import Any

_ANY_OBJECT = {"type": "object"}


def engine_is_compact(engine_args: dict) -> bool:
    config = engine_args.get("structured_outputs_config") or {}
    return bool(isinstance(config, dict) and config.get("disable_any_whitespace"))


def enforce(structured: dict[str, Any], engine_compact: bool) -> dict[str, Any]:
    """`structured_outputs` as vLLM should get it: a JSON constraint that asks for compact
    JSON, on an engine that is not compact already, becomes a grammar."""
    if not structured.get("disable_any_whitespace") or engine_compact:
        return structured
    if "json" in structured:
        schema = structured["json"]
    elif structured.get("json_object"):
        schema = _ANY_OBJECT
    else:
        return structured  # regex, choice, grammar: no free whitespace to take away
    import xgrammar

    text = schema if isinstance(schema, str) else json.dumps(schema)
    grammar = xgrammar.Grammar.from_json_schema(text, any_whitespace=False,
                                                separators=(",", ":"))
    out = {k: v for k, v in structured.items() if k not in ("json", "json_object")}
    out["grammar"] = str(grammar)
    return out

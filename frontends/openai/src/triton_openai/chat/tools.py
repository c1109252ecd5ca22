"""How a chat request uses tools, and how generated text becomes tool calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import BadRequestError
from ..tool_parsers import ToolCall, ToolParser
from .protocol import ChatCompletionRequest, NamedToolChoice

# A choice's text is held back while it may still be a tool call, in these modes.
HOLDING_MODES = ("auto", "required")


def _required_schema(tools) -> dict:
    """Any number (>= 1) of calls to the given tools, as a JSON array (vLLM's convention)."""
    return {"type": "array", "minItems": 1, "items": {"anyOf": [{
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [t.function.name]},
                       "parameters": t.function.parameters or {"type": "object"}},
        "required": ["name", "parameters"]} for t in tools]}}


def _parse_required(text: str) -> list[ToolCall]:
    try:
        items = json.loads(text)
    except ValueError:
        return []
    return [ToolCall(i["name"], json.dumps(i.get("parameters", {}), ensure_ascii=False))
            for i in items if isinstance(i, dict) and "name" in i]


@dataclass
class ToolUse:
    mode: str  # "none", "auto", "required" or "named"
    parser: ToolParser
    named: str | None = None  # the function a named tool_choice forces
    constraint: dict | None = None  # structured outputs that force the calls
    _named_calls: dict[int, ToolCall] = field(default_factory=dict)

    @classmethod
    def of(cls, req: ChatCompletionRequest, parser: ToolParser) -> ToolUse:
        if not req.tools or req.tool_choice == "none":
            return cls("none", parser)
        if isinstance(req.tool_choice, NamedToolChoice):
            named = req.tool_choice.function.name
            match = [t for t in req.tools if t.function.name == named]
            if not match:
                raise BadRequestError(f"tool_choice names {named!r}, which is not in tools",
                                      param="tool_choice")
            return cls("named", parser, named,
                       {"json": match[0].function.parameters or {"type": "object"}})
        if req.tool_choice == "required":
            return cls("required", parser, constraint={"json": _required_schema(req.tools)})
        return cls(req.tool_choice or "auto", parser)

    def named_call(self, index: int) -> ToolCall:
        if index not in self._named_calls:
            self._named_calls[index] = ToolCall(self.named, "")
        return self._named_calls[index]

    def finish(self, text: str, reason: str) -> tuple[str | None, list[ToolCall], str]:
        """(content, tool calls, finish_reason) for one finished choice."""
        if self.mode == "named":
            call = self.named_call(0)
            # OpenAI reports "stop" when the caller forced a named function.
            return None, [ToolCall(self.named, text, call.id)], reason
        if self.mode == "required":
            calls = _parse_required(text)
            return (None, calls, "tool_calls") if calls else (text, [], reason)
        if self.mode == "auto" and reason == "stop":
            content, calls = self.parser.parse(text)
            if calls:
                return content, calls, "tool_calls"
        return text, [], reason

"""How a request uses tools, and how generated text becomes tool calls.

Chat completions and the Responses API (its tools in chat's shape) both ask for tools
in chat's fields, read here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from ..tool_parsers import ToolCall, ToolParser
from ..web.errors import BadRequestError
from .messages import ChatTool, NamedToolChoice

# A choice's text is held back while it may still be a tool call, in these modes.
HOLDING_MODES = ("auto", "required")


def _required_schema(tools, parallel: bool) -> dict:
    """Calls to the given tools as a JSON array (vLLM's convention): one or more, or
    exactly one when the request turned parallel calls off."""
    count = {"minItems": 1} if parallel else {"minItems": 1, "maxItems": 1}
    return {"type": "array", **count, "items": {"anyOf": [{
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


class ToolFields(Protocol):
    """A request's tool fields, in chat's shape: a chat completion request, or a
    Responses request's tools turned into them."""
    tools: list[ChatTool] | None
    tool_choice: str | NamedToolChoice | None
    parallel_tool_calls: bool | None


@dataclass
class ToolUse:
    mode: str  # "none", "auto", "required" or "named"
    parser: ToolParser
    named: str | None = None  # the function a named tool_choice forces
    constraint: dict | None = None  # structured outputs that force the calls
    parallel: bool = True  # False: at most one call per choice
    _named_calls: dict[int, ToolCall] = field(default_factory=dict)

    @classmethod
    def of(cls, req: ToolFields, parser: ToolParser) -> ToolUse:
        parallel = req.parallel_tool_calls is not False
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
            return cls("required", parser, parallel=parallel,
                       constraint={"json": _required_schema(req.tools, parallel)})
        return cls(req.tool_choice or "auto", parser, parallel=parallel)

    def named_call(self, index: int) -> ToolCall:
        if index not in self._named_calls:
            self._named_calls[index] = ToolCall(self.named, "")
        return self._named_calls[index]

    def finish(self, index: int, text: str,
               reason: str) -> tuple[str | None, list[ToolCall], str]:
        """(content, tool calls, finish_reason) for the finished choice `index`."""
        if self.mode == "named":
            call = self.named_call(index)
            # OpenAI reports "stop" when the caller forced a named function.
            return None, [ToolCall(self.named, text, call.id)], reason
        if self.mode == "required":
            calls = _parse_required(text)[:1 if not self.parallel else None]
            return (None, calls, "tool_calls") if calls else (text, [], reason)
        if self.mode == "auto" and reason == "stop":
            content, calls = self.parser.parse(text)
            if calls:
                # parallel_tool_calls: false: the first call only, as vLLM does.
                return content, calls[:1 if not self.parallel else None], "tool_calls"
        return text, [], reason

"""Responses items <-> chat messages: the Responses API renders its prompt through the
same chat template, tool definitions and tool parser as /v1/chat/completions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..chat.protocol import ChatMessage, ChatTool, NamedToolChoice
from ..errors import BadRequestError

_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")


def _text(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequestError(f"{param} must be a string or a list of text parts", param=param)
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS:
            raise BadRequestError(f"content part type {kind!r} is not supported by a text "
                                  f"model; use input_text", param=f"{param}[{j}].type")
        texts.append(part.get("text", ""))
    return "".join(texts)


def input_messages(value: str | list[dict[str, Any]]) -> list[ChatMessage]:
    """The request's `input` as chat messages."""
    if isinstance(value, str):
        return [ChatMessage(role="user", content=value)]
    out: list[ChatMessage] = []
    for i, item in enumerate(value):
        param = f"input[{i}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                raise BadRequestError(f"{param}.role must be one of {list(_ROLES)}, not {role!r}",
                                      param=f"{param}.role")
            out.append(ChatMessage(role=role, content=_text(item.get("content"),
                                                            f"{param}.content")))
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str):
                    raise BadRequestError(f"{param}.{key} must be a string", param=f"{param}.{key}")
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = out[-1] if out else None
            if last is not None and last.role == "assistant" and last.tool_calls:
                last.tool_calls.append(call)  # parallel calls: one assistant turn
            else:
                out.append(ChatMessage(role="assistant", content=None, tool_calls=[call]))
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(item.get("call_id"), str):
                raise BadRequestError(f"{param}.call_id must be a string", param=f"{param}.call_id")
            out.append(ChatMessage(role="tool", tool_call_id=item["call_id"],
                                   content=_text(output, f"{param}.output")))
        else:
            raise BadRequestError(f"input item type {kind!r} is not supported; use message, "
                                  f"function_call or function_call_output", param=f"{param}.type")
    return out


def output_messages(output: list[dict[str, Any]]) -> list[ChatMessage]:
    """A response's output items as the chat messages of the next turn."""
    items = [item for item in output if item.get("type") in ("message", "function_call")]
    return input_messages(items)


@dataclass
class ToolRequest:
    """A Responses request's tools in chat's shape, for chat.tools.ToolUse."""
    tools: list[ChatTool] | None
    tool_choice: str | NamedToolChoice | None
    parallel_tool_calls: bool | None

    @classmethod
    def of(cls, tools: list[dict] | None, choice: str | dict | None,
           parallel: bool | None) -> ToolRequest:
        chat_tools = [ChatTool(type="function", function={
            k: t[k] for k in ("name", "description", "parameters") if t.get(k) is not None})
            for t in tools or []] or None
        if isinstance(choice, dict):
            choice = NamedToolChoice(function={"name": choice["name"]})
        if choice in ("required",) or isinstance(choice, NamedToolChoice):
            if not chat_tools:
                raise BadRequestError("tool_choice needs tools", param="tool_choice")
        return cls(chat_tools, choice, parallel)

"""Responses items <-> chat messages: the Responses API renders its prompt through the
same chat template, tool definitions and tool parser as /v1/chat/completions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..conversation.messages import ChatMessage, ChatTool, NamedToolChoice
from ..web.errors import BadRequestError

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


def _reasoning_text(item: dict[str, Any], param: str) -> str:
    """A reasoning item's text: its reasoning_text parts (a summary is not the reasoning)."""
    if item.get("encrypted_content") is not None:
        raise BadRequestError("encrypted reasoning cannot be read by this server; send the "
                              "reasoning as content", param=f"{param}.encrypted_content")
    content = item.get("content") or []
    if not isinstance(content, list):
        raise BadRequestError(f"{param}.content must be a list of reasoning_text parts",
                              param=f"{param}.content")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "reasoning_text" or not isinstance(part.get("text"), str):
            raise BadRequestError(f"{param}.content[{j}] must be a reasoning_text part",
                                  param=f"{param}.content[{j}]")
        texts.append(part["text"])
    return "".join(texts)


def input_messages(value: str | list[dict[str, Any]]) -> list[ChatMessage]:
    """The request's `input` as chat messages.  A reasoning item becomes the `reasoning` of
    the assistant turn that follows it (or of an empty one, when none does)."""
    if isinstance(value, str):
        return [ChatMessage(role="user", content=value)]
    out: list[ChatMessage] = []
    thought: str | None = None  # a reasoning item's, waiting for its assistant turn

    def flush() -> None:
        nonlocal thought
        if thought is not None:
            out.append(ChatMessage(role="assistant", content="", reasoning=thought))
            thought = None

    for i, item in enumerate(value):
        param = f"input[{i}]"
        kind = item.get("type", "message")
        if kind == "reasoning":
            text = _reasoning_text(item, param)
            thought = text if thought is None else thought + text
            continue
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                raise BadRequestError(f"{param}.role must be one of {list(_ROLES)}, not {role!r}",
                                      param=f"{param}.role")
            content = _text(item.get("content"), f"{param}.content")
            if role == "assistant" and thought is not None:
                out.append(ChatMessage(role=role, content=content, reasoning=thought))
                thought = None
            else:
                flush()
                out.append(ChatMessage(role=role, content=content))
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str):
                    raise BadRequestError(f"{param}.{key} must be a string", param=f"{param}.{key}")
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = out[-1] if out else None
            if thought is None and last is not None and last.role == "assistant" \
                    and last.tool_calls:
                last.tool_calls.append(call)  # parallel calls: one assistant turn
            else:
                out.append(ChatMessage(role="assistant", content=None, tool_calls=[call],
                                       reasoning=thought))
                thought = None
        elif kind == "function_call_output":
            flush()
            output = item.get("output")
            if not isinstance(item.get("call_id"), str):
                raise BadRequestError(f"{param}.call_id must be a string", param=f"{param}.call_id")
            out.append(ChatMessage(role="tool", tool_call_id=item["call_id"],
                                   content=_text(output, f"{param}.output")))
        else:
            raise BadRequestError(f"input item type {kind!r} is not supported; use message, "
                                  f"reasoning, function_call or function_call_output",
                                  param=f"{param}.type")
    flush()
    return out


def output_messages(output: list[dict[str, Any]]) -> list[ChatMessage]:
    """A response's output items as the chat messages of the next turn."""
    items = [item for item in output
             if item.get("type") in ("reasoning", "message", "function_call")]
    return input_messages(items)


@dataclass
class ToolRequest:
    """A Responses request's tools in chat's shape, for conversation.tools.ToolUse."""
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

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI sends it
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")

    def to_openai(self, index: int | None = None) -> dict:
        out = {"id": self.id, "type": "function",
               "function": {"name": self.name, "arguments": self.arguments}}
        if index is not None:
            out["index"] = index
        return out


class ToolParser:
    name = ""

    def may_be_call(self, text: str) -> bool:
        """Whether streamed text so far could be the start of a tool call (then it is held back)."""
        raise NotImplementedError

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """(content left over, tool calls); no calls when the text is not a valid call."""
        raise NotImplementedError


def _decode_objects(text: str) -> list | None:
    """One JSON value, or several separated by ';' or whitespace; None when not JSON."""
    dec = json.JSONDecoder()
    out, i, text = [], 0, text.strip()
    while i < len(text):
        while i < len(text) and text[i] in " \t\n;,":
            i += 1
        if i >= len(text):
            break
        try:
            value, i = dec.raw_decode(text, i)
        except ValueError:
            return None
        out.append(value)
    return out


class Llama3JsonParser(ToolParser):
    name = "llama3_json"

    def may_be_call(self, text: str) -> bool:
        s = text.lstrip()
        return s == "" or s.startswith("{") or s.startswith("<|python_tag|>")

    def parse(self, text):
        s = text.strip().removeprefix("<|python_tag|>")
        values = _decode_objects(s) if s.startswith("{") else None
        calls = []
        for v in values or []:
            if not isinstance(v, dict) or not isinstance(v.get("name"), str):
                return text, []
            args = v.get("parameters", v.get("arguments", {}))
            calls.append(ToolCall(v["name"], json.dumps(args, ensure_ascii=False)))
        return (None, calls) if calls else (text, [])


class MistralParser(ToolParser):
    name = "mistral"
    marker = "[TOOL_CALLS]"

    def may_be_call(self, text: str) -> bool:
        s = text.lstrip()
        return s.startswith(self.marker) or self.marker.startswith(s)

    def parse(self, text):
        if self.marker not in text:
            return text, []
        content, _, rest = text.partition(self.marker)
        values = _decode_objects(rest)
        if not values:
            return text, []
        items = values[0] if isinstance(values[0], list) else values
        calls = []
        for v in items:
            if not isinstance(v, dict) or not isinstance(v.get("name"), str):
                return text, []
            args = v.get("arguments", v.get("parameters", {}))
            calls.append(ToolCall(v["name"], json.dumps(args, ensure_ascii=False)))
        return (content.strip() or None), calls


def _call(value, args_keys=("arguments", "parameters")) -> ToolCall | None:
    """A {"name", "arguments"|"parameters"} object as a call; None when it is not one."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    args = next((value[k] for k in args_keys if k in value), {})
    if isinstance(args, str):
        return ToolCall(value["name"], args)  # already JSON text
    return ToolCall(value["name"], json.dumps(args, ensure_ascii=False))


class HermesParser(ToolParser):
    """Hermes, Qwen2.5, Qwen3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
    one block per call, after optional content."""
    name = "hermes"
    open_tag, close_tag = "<tool_call>", "</tool_call>"

    def may_be_call(self, text: str) -> bool:
        s = text.lstrip()
        return s.startswith(self.open_tag) or self.open_tag.startswith(s)

    def parse(self, text):
        if self.open_tag not in text:
            return text, []
        content, _, rest = text.partition(self.open_tag)
        calls = []
        for block in (self.open_tag + rest).split(self.open_tag)[1:]:
            values = _decode_objects(block.partition(self.close_tag)[0])
            call = _call(values[0]) if values and len(values) == 1 else None
            if call is None:
                return text, []
            calls.append(call)
        return (content.strip() or None), calls


_PARSERS: dict[str, type[ToolParser]] = {}


def register(parser: type[ToolParser]) -> type[ToolParser]:
    """Make a parser available to --tool-call-parser under its name."""
    _PARSERS[parser.name] = parser
    return parser


for _parser in (Llama3JsonParser, MistralParser, HermesParser):
    register(_parser)


def parser_names() -> list[str]:
    return sorted(_PARSERS)


def get_parser(name: str) -> ToolParser:
    try:
        return _PARSERS[name]()
    except KeyError:
        raise ValueError(f"unknown tool call parser {name!r}; choose from {sorted(_PARSERS)}") from None

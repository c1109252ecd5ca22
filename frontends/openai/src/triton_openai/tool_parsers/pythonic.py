"""Pythonic tool calls (Llama 3.2 and 4, and others): a Python list of calls with keyword
arguments, `[get_weather(city="Paris"), get_time(zone="CET")]`."""

from __future__ import annotations

import ast
import json

from .base import ToolCall, ToolParser, register


def _call(node: ast.expr) -> ToolCall | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = node.func
    if isinstance(name, ast.Attribute):  # module.function: the dotted name
        parts = []
        while isinstance(name, ast.Attribute):
            parts.append(name.attr)
            name = name.value
        if not isinstance(name, ast.Name):
            return None
        function = ".".join([name.id, *reversed(parts)])
    elif isinstance(name, ast.Name):
        function = name.id
    else:
        return None
    try:
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except ValueError:  # not a literal: not a call this parser can report
        return None
    return ToolCall(function, json.dumps(args, ensure_ascii=False))


@register
class PythonicParser(ToolParser):
    name = "pythonic"
    tags = ("<|python_start|>", "<|python_end|>")

    def may_be_call(self, text: str) -> bool:
        s = text.lstrip()
        return s == "" or s.startswith("[") or s.startswith(self.tags[0]) or self.tags[0].startswith(s)

    def parse(self, text):
        s = text.strip().removeprefix(self.tags[0]).removesuffix(self.tags[1]).strip()
        if not s.startswith("["):
            return text, []
        try:
            tree = ast.parse(s, mode="eval").body
        except SyntaxError:
            return text, []
        if not isinstance(tree, ast.List) or not tree.elts:
            return text, []
        calls = [_call(e) for e in tree.elts]
        if any(c is None for c in calls):
            return text, []
        return None, calls

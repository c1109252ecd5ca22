"""Turn a model's text into OpenAI tool calls.

Each parser knows one model family's convention:
  llama3_json   {"name": ..., "parameters": {...}} (one object, or several split by ';')
  mistral       [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
  hermes        <tool_call>{"name": ..., "arguments": {...}}</tool_call> ... (Hermes, Qwen)
  pythonic      [f(a=1), g(b="x")] (Llama 3.2 and 4)

A new convention is a ToolParser subclass passed to `register`.
"""

from . import pythonic as _pythonic  # noqa: F401  (registers itself)
from .base import ToolCall, ToolParser, get_parser, parser_names, register

__all__ = ["ToolCall", "ToolParser", "get_parser", "parser_names", "register"]

"""Turn a model's text into OpenAI tool calls.

Each parser knows one model family's convention:
  llama3_json   {"name": ..., "parameters": {...}} (one object, or several split by ';')
  mistral       [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
"""

from .base import ToolCall, ToolParser, get_parser

__all__ = ["ToolCall", "ToolParser", "get_parser"]

"""The messages and tool definitions of a conversation, in chat completions' shape.

Chat completions take them as they are; the Responses API turns its items into them and
/tokenize renders them, so they sit here rather than in chat/.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..web.protocol import OpenAIBaseModel


class FunctionDefinition(OpenAIBaseModel):
    name: str = Field(description="Function name the model may call.")
    description: str | None = Field(default=None, description="What the function does.")
    parameters: dict[str, Any] | None = Field(default=None, description="JSON schema of the arguments.")


class ChatTool(OpenAIBaseModel):
    type: Literal["function"] = Field(default="function", description="Only functions exist.")
    function: FunctionDefinition


class NamedFunction(OpenAIBaseModel):
    name: str


class NamedToolChoice(OpenAIBaseModel):
    type: Literal["function"] = "function"
    function: NamedFunction


class ChatMessage(OpenAIBaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    # --- vLLM extensions: an assistant turn's reasoning, sent back to the model ---------
    reasoning: str | None = None
    reasoning_content: str | None = Field(default=None, description="Older name of reasoning.")

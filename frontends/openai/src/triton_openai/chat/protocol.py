"""Request model of /v1/chat/completions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ..conversation.messages import ChatMessage, ChatTool, NamedToolChoice
from ..web.protocol import OpenAIBaseModel, SamplingFields


class JsonSchemaSpec(OpenAIBaseModel):
    name: str | None = None
    description: str | None = None
    # `schema` shadows a BaseModel attribute, hence the alias.
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(OpenAIBaseModel):
    type: Literal["text", "json_object", "json_schema"] = Field(description="Answer format.")
    json_schema: JsonSchemaSpec | None = None


class ChatCompletionRequest(SamplingFields):
    # --- OpenAI fields ---------------------------------------------------------
    messages: list[ChatMessage] = Field(min_length=1, description="The conversation so far.")
    max_tokens: int | None = Field(default=None, ge=1, description="Deprecated alias of max_completion_tokens.")
    max_completion_tokens: int | None = Field(
        default=None, ge=1, description="Tokens to generate; default: what the context leaves.")
    logprobs: bool = Field(default=False, description="Return log probabilities of the tokens.")
    top_logprobs: int | None = Field(default=None, ge=0, le=20, description="Alternatives per token.")
    response_format: ResponseFormat | None = Field(default=None, description="text, json_object or json_schema.")
    tools: list[ChatTool] | None = Field(default=None, description="Functions the model may call.")
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        default=None, description="none, auto (default with tools), required, or a named function.")
    parallel_tool_calls: bool | None = Field(
        default=None, description="false: at most one tool call per choice.")

    # --- vLLM extensions ---------------------------------------------------------
    add_generation_prompt: bool = Field(default=True, description="vLLM: end the prompt with the assistant turn.")
    continue_final_message: bool = Field(default=False, description="vLLM: continue the last message.")
    chat_template: str | None = Field(default=None, description="vLLM: a Jinja template for this request.")
    chat_template_kwargs: dict[str, Any] | None = Field(default=None, description="vLLM: extra template variables.")
    structured_outputs: dict[str, Any] | None = Field(default=None, description="vLLM: json/regex/choice/grammar.")

    @model_validator(mode="after")
    def _check(self):
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        if isinstance(self.tool_choice, NamedToolChoice) or self.tool_choice == "required":
            if not self.tools:
                raise ValueError("tool_choice needs tools")
        return self

    @property
    def completion_budget(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

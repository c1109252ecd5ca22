"""Request and response models of /tokenize and /detokenize (vLLM's API; no OpenAI
counterpart)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from ..conversation.messages import ChatMessage, ChatTool
from ..web.protocol import RequestBody


class TokenizeRequest(RequestBody):
    model: str | None = Field(default=None, description="Model id; optional when one is served.")
    prompt: str | None = Field(default=None, description="Text to tokenize (or messages).")
    messages: list[ChatMessage] | None = Field(
        default=None, description="A conversation, tokenized as the model's chat template renders it.")
    add_special_tokens: bool | None = Field(
        default=None, description="Add BOS and the like (default: true for a prompt, false for "
                                  "messages, whose template writes them).")
    add_generation_prompt: bool = Field(default=True, description="messages: end with the assistant turn.")
    continue_final_message: bool = Field(default=False, description="messages: continue the last message.")
    chat_template: str | None = Field(default=None, description="messages: a Jinja template instead.")
    chat_template_kwargs: dict[str, Any] | None = Field(default=None, description="messages: template variables.")
    tools: list[ChatTool] | None = Field(default=None, description="messages: tools the template shows.")
    return_token_strs: bool = Field(default=False, description="Also return each token's string.")

    @model_validator(mode="after")
    def _one_input(self):
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt and messages")
        return self


class TokenizeResponse(BaseModel):
    count: int = Field(description="Number of tokens.")
    max_model_len: int | None = Field(description="The model's context length, when known.")
    tokens: list[int] = Field(description="Token ids.")
    token_strs: list[str] | None = Field(default=None, description="Each token's string, when asked.")


class DetokenizeRequest(RequestBody):
    model: str | None = Field(default=None, description="Model id; optional when one is served.")
    tokens: list[int] = Field(description="Token ids to turn into text.")


class DetokenizeResponse(BaseModel):
    prompt: str = Field(description="The text of the tokens.")

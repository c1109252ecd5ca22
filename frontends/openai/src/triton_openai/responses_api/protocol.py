"""Request model of /v1/responses.

Unlike the other surfaces, unknown fields are refused (as OpenAI's Responses API does),
and OpenAI fields this server does not implement are named in a 400 by `rejections`:
a client that asks for a built-in tool or a reasoning effort must not get a plain answer
that silently ignored it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..web.protocol import valid_unicode


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"] = Field(description="Answer format.")
    name: str | None = Field(default=None, description="json_schema: the schema's name.")
    description: str | None = Field(default=None, description="json_schema: what it describes.")
    # `schema` shadows a BaseModel attribute, hence the alias.
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema",
                                               description="json_schema: the JSON schema.")
    strict: bool | None = Field(default=None, description="json_schema: always enforced here.")


class TextConfig(_Strict):
    format: TextFormat | None = Field(default=None, description="text, json_object or json_schema.")
    verbosity: str | None = Field(default=None, description="Rejected: no verbosity control.")


class StreamOptions(_Open):
    include_obfuscation: bool | None = Field(
        default=None, description="Accepted; events carry no obfuscation padding.")


class ResponsesRequest(_Strict):
    # --- OpenAI fields ---------------------------------------------------------
    model: str = Field(description="Model id from /v1/models.")
    input: str | list[dict[str, Any]] = Field(
        description="A user message as text, or a list of messages and function call items.")
    instructions: str | None = Field(
        default=None, description="A system message before the input (not carried over by "
                                  "previous_response_id).")
    max_output_tokens: int | None = Field(default=None, ge=1, description="Tokens to generate.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    text: TextConfig | None = Field(default=None, description="The answer's format.")
    tools: list[dict[str, Any]] | None = Field(default=None, description="Function tools.")
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = Field(
        default=None, description="none, auto (default with tools), required, or "
                                  "{type: function, name}.")
    parallel_tool_calls: bool | None = Field(default=None, description="Passed to the tool parser.")
    store: bool = Field(default=True, description="Keep the response for GET and "
                                                  "previous_response_id.")
    previous_response_id: str | None = Field(
        default=None, description="Continue a stored response's conversation.")
    stream: bool = Field(default=False, description="Stream the Responses events.")
    stream_options: StreamOptions | None = Field(default=None, description="Streaming options.")
    background: bool | None = Field(default=None, description="Answer at once; generate on.")
    metadata: dict[str, str] | None = Field(default=None, description="Echoed on the response.")
    user: str | None = Field(default=None, description="Echoed; not used.")
    safety_identifier: str | None = Field(default=None, description="Accepted; not used.")
    prompt_cache_key: str | None = Field(default=None, description="Accepted; vLLM caches "
                                                                    "prefixes by itself.")
    service_tier: str | None = Field(default=None, description="auto or default.")
    truncation: str | None = Field(default=None, description="disabled (the only mode).")
    # OpenAI fields that are rejected with a 400 unless empty (see `rejections`).
    include: list[str] | None = Field(default=None, description="Rejected: nothing to include.")
    reasoning: dict[str, Any] | None = Field(
        default=None, description="Rejected unless empty: effort cannot be controlled and no "
                                  "summaries are made; reasoning comes as reasoning items with "
                                  "--reasoning-parser.")
    top_logprobs: int | None = Field(default=None, description="Rejected.")
    max_tool_calls: int | None = Field(default=None, description="Rejected.")
    conversation: Any = Field(default=None, description="Rejected: use previous_response_id.")
    prompt: Any = Field(default=None, description="Rejected: no stored prompts.")

    # --- vLLM extensions ---------------------------------------------------------
    top_k: int | None = Field(default=None, description="vLLM: top-k sampling (-1 or 0 = off).")
    min_p: float | None = Field(default=None, ge=0, le=1, description="vLLM: min-p sampling.")
    repetition_penalty: float | None = Field(default=None, gt=0, description="vLLM: repetition penalty.")
    seed: int | None = Field(default=None, description="vLLM: seed for reproducible sampling.")
    structured_outputs: dict[str, Any] | None = Field(
        default=None, description="vLLM: json/regex/choice/grammar, as in chat completions.")

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return valid_unicode(data)

    def rejections(self) -> list[tuple[str, str]]:
        """(param, why) for every field set to something this server does not do."""
        out = []
        if self.include:
            out.append(("include", f"include values {self.include} are not supported"))
        if self.reasoning and any(v is not None for v in self.reasoning.values()):
            out.append(("reasoning", "reasoning.effort and reasoning.summary are not supported "
                                     "by this server: effort cannot be controlled and no "
                                     "summaries are made (a server started with "
                                     "--reasoning-parser returns the model's reasoning as "
                                     "reasoning items)"))
        if self.top_logprobs:
            out.append(("top_logprobs", "top_logprobs is not supported by /v1/responses"))
        for name in ("max_tool_calls", "conversation", "prompt"):
            if getattr(self, name) is not None:
                out.append((name, f"{name} is not supported by this server"))
        if self.truncation not in (None, "disabled"):
            out.append(("truncation", "truncation must be 'disabled': the prompt is never cut"))
        if self.service_tier not in (None, "auto", "default"):
            out.append(("service_tier", "service_tier must be auto or default"))
        if self.text is not None and self.text.verbosity is not None:
            out.append(("text.verbosity", "text.verbosity is not supported by this server"))
        if self.background and not self.store:
            out.append(("background", "background needs store: true"))
        for i, tool in enumerate(self.tools or []):
            if tool.get("type") != "function":
                out.append((f"tools[{i}].type", f"tool type {tool.get('type')!r} is not "
                                                f"supported; only function tools are"))
            elif not isinstance(tool.get("name"), str):
                out.append((f"tools[{i}].name", "a function tool needs a name"))
        if isinstance(self.tool_choice, dict) and (
                self.tool_choice.get("type") != "function"
                or not isinstance(self.tool_choice.get("name"), str)):
            out.append(("tool_choice", "tool_choice must be none, auto, required or "
                                       "{type: function, name}"))
        return out

    def sampling_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": 1}
        for key in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

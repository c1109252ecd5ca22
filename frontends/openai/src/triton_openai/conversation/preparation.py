"""What chat completions and the Responses API share before generating: the server's chat
template, tool parser and reasoning parser, and from them each request's tool use, prompt
and decoder."""

from __future__ import annotations

from typing import Any

from ..generation.prompts import Prompt
from ..generation.service import GenerationService, tokenize
from ..reasoning import get_parser as get_reasoning_parser
from ..served_models.catalog import ServedModel
from ..tool_parsers import get_parser as get_tool_parser
from .decoding import Decoder
from .messages import ChatMessage
from .templating import messages_for_template, render
from .tools import ToolFields, ToolUse


def _text_size(messages: list[dict]) -> int:
    """Characters of the messages' text: what tokenizing them costs."""
    size = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            size += len(content)
        elif isinstance(content, list):
            size += sum(len(part.get("text") or "") for part in content
                        if isinstance(part, dict))
    return size


class ConversationPreparation:
    def __init__(self, generation: GenerationService, chat_template: str | None = None,
                 tool_parser: str = "llama3_json", reasoning_parser: str | None = None):
        self.gen = generation
        self.chat_template = chat_template
        get_tool_parser(tool_parser)  # fail at start-up on an unknown name
        self.tool_parser_name = tool_parser
        self.reasoning = get_reasoning_parser(reasoning_parser) if reasoning_parser else None

    def tools(self, request: ToolFields) -> ToolUse:
        """How a request (with chat's `tools`, `tool_choice` and `parallel_tool_calls`)
        uses its tools."""
        return ToolUse.of(request, get_tool_parser(self.tool_parser_name))

    async def prompt(self, model: ServedModel, messages: list[ChatMessage], tools: ToolUse,
                     tool_defs: list | None, template: str | None = None,
                     add_generation_prompt: bool = True, continue_final_message: bool = False,
                     template_kwargs: dict[str, Any] | None = None) -> Prompt:
        """The messages through the chat template (the request's, else the server's), with
        the tool definitions unless the request turned tools off."""
        tok = await self.gen.tokenizer(model)
        tool_dicts = None
        if tools.mode != "none":
            tool_dicts = [t.model_dump(exclude_none=True) for t in tool_defs]
        for_template = messages_for_template(messages)
        size = 0 if tok is None else _text_size(for_template)
        text, ids = await tokenize(size, render, tok, for_template,
                                   template or self.chat_template, tool_dicts,
                                   add_generation_prompt, continue_final_message,
                                   template_kwargs)
        return Prompt(text, ids)

    def decoder(self, tools: ToolUse, json_answer: bool) -> Decoder:
        """`json_answer`: the request's format makes the answer JSON from its first token."""
        return Decoder.of(tools, self.reasoning, json_answer)

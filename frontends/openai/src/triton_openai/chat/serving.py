"""The logic of /v1/chat/completions: templating, tools, structured outputs, streaming."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from fastapi.responses import Response

from ..conversation.preparation import ConversationPreparation
from ..generation.fanin import primed
from ..generation.service import GenerationService
from ..generation.structured import from_response_format
from ..triton.vllm_contract import GENERATE
from ..web.answers import event_stream_response, json_response, usage
from ..web.request_ids import request_id
from .context import ChatContext
from .protocol import ChatCompletionRequest
from .stream import ChatStream, chat_events, encoded_chat_events


def _format_constraint(req: ChatCompletionRequest) -> dict | None:
    if req.response_format is None:
        return None
    return from_response_format(req.response_format.model_dump(by_alias=True))


class ChatServing:
    def __init__(self, generation: GenerationService, chat_template: str | None = None,
                 tool_parser: str = "llama3_json", reasoning_parser: str | None = None):
        self.gen = generation
        self.conversation = ConversationPreparation(generation, chat_template, tool_parser,
                                                    reasoning_parser)

    async def create(self, req: ChatCompletionRequest) -> Response:
        model = await self.gen.catalog.get(req.model, runner=GENERATE)
        tools = self.conversation.tools(req)
        prompt = await self.conversation.prompt(
            model, req.messages, tools, req.tools, req.chat_template, req.add_generation_prompt,
            req.continue_final_message, req.chat_template_kwargs)
        sampling = self.gen.sampling(
            model, prompt, req.sampling_dict(), max_tokens=req.completion_budget,
            max_tokens_param="max_completion_tokens", prompt_param="messages",
            logprobs=(req.top_logprobs or 0) if req.logprobs else None,
            # Forced tool calls first, then the request's format.
            constraint=tools.constraint or _format_constraint(req),
            structured_outputs=req.structured_outputs)
        json_answer = req.response_format is not None and req.response_format.type != "text"
        ctx = ChatContext(req, model.id, request_id("chatcmpl"), int(time.time()),
                          self.conversation.decoder(tools, json_answer), prompt.num_tokens)
        if req.stream:
            out = ChatStream(ctx)
            if out.encodable():
                encoded = await primed(self.gen.events(model, prompt, sampling, out.template()))
                return event_stream_response(encoded_chat_events(out, encoded), encoded)
        stream = self.gen.run(model, [prompt], [sampling], req.stream, req.logprobs)
        if req.stream:
            stream = await primed(stream)
            return event_stream_response(chat_events(ctx, stream), stream)
        return await self._full(ctx, stream)

    async def _full(self, ctx: ChatContext, stream: AsyncIterator) -> Response:
        n = ctx.req.n
        texts, reasons, counts = [""] * n, [None] * n, [0] * n
        lps: list[list] = [[] for _ in range(n)]
        n_in = ctx.prompt_tokens or 0
        async for _, chunk in stream:
            if chunk.num_input_tokens is not None:
                n_in = chunk.num_input_tokens
            for d in chunk.choices:
                texts[d.index] += d.text
                if d.finish_reason:
                    reasons[d.index] = d.finish_reason
                if d.num_output_tokens is not None:
                    counts[d.index] += d.num_output_tokens
                content = ctx.logprobs(d)
                if content is not None:
                    lps[d.index].extend(content)
        choices = []
        for i in range(n):
            piece = ctx.decoder.whole(i, texts[i], reasons[i] or "stop")
            message = {"role": "assistant", "content": piece.content}
            if ctx.decoder.reasoning:
                message["reasoning"] = piece.reasoning or None
            if piece.calls:
                message["tool_calls"] = [c.to_openai() for c in piece.calls]
            choices.append({"index": i, "message": message,
                            "logprobs": {"content": lps[i]} if ctx.req.logprobs else None,
                            "finish_reason": piece.finish})
        return json_response({"id": ctx.rid, "object": "chat.completion", "created": ctx.created,
                              "model": ctx.model_id, "choices": choices,
                              "usage": usage(n_in, sum(counts))})

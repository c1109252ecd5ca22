"""The logic of /v1/chat/completions: templating, tools, structured outputs, streaming."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import Response

from .. import sse
from ..errors import BadRequestError, OpenAIError, from_triton
from ..generation import GenerationService, Prompt, primed, request_id, until_disconnected
from ..logprobs import chat_logprobs
from ..structured import from_response_format, validate_structured_outputs
from ..tool_parsers import ToolCall, ToolParser, get_parser
from ..triton.client import TritonError
from .protocol import ChatCompletionRequest, NamedToolChoice
from .templating import messages_for_template, render


def _tool_mode(req: ChatCompletionRequest) -> str:
    if not req.tools or req.tool_choice == "none":
        return "none"
    if isinstance(req.tool_choice, NamedToolChoice):
        return "named"
    return req.tool_choice or "auto"


def _required_schema(tools) -> dict:
    """Any number (>= 1) of calls to the given tools, as a JSON array (vLLM's convention)."""
    return {"type": "array", "minItems": 1, "items": {"anyOf": [{
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [t.function.name]},
                       "parameters": t.function.parameters or {"type": "object"}},
        "required": ["name", "parameters"]} for t in tools]}}


def _parse_required(text: str) -> list[ToolCall]:
    try:
        items = json.loads(text)
    except ValueError:
        return []
    return [ToolCall(i["name"], json.dumps(i.get("parameters", {}), ensure_ascii=False))
            for i in items if isinstance(i, dict) and "name" in i]


class ChatServing:
    def __init__(self, generation: GenerationService, chat_template: str | None = None,
                 tool_parser: str = "llama3_json"):
        self.gen = generation
        self.chat_template = chat_template
        get_parser(tool_parser)  # fail at start-up on an unknown name
        self.tool_parser_name = tool_parser

    async def create(self, req: ChatCompletionRequest, raw: Request) -> Response:
        model = await self.gen.catalog.get(req.model, runner="generate")
        tok = await self.gen.tokenizer(model)
        mode = _tool_mode(req)
        named = req.tool_choice.function.name if mode == "named" else None
        tools = None
        if mode != "none":
            tools = [t.model_dump(exclude_none=True) for t in req.tools]
            if named is not None:
                match = [t for t in req.tools if t.function.name == named]
                if not match:
                    raise BadRequestError(f"tool_choice names {named!r}, which is not in tools",
                                          param="tool_choice")
        text, ids = render(tok, messages_for_template(req.messages),
                           req.chat_template or self.chat_template, tools,
                           req.add_generation_prompt, req.continue_final_message,
                           req.chat_template_kwargs)
        prompt = Prompt(text, ids)

        sampling = req.sampling_dict()
        sampling["max_tokens"] = self.gen.budget(
            model, prompt, req.completion_budget, "max_completion_tokens", "messages")
        if req.logprobs:
            sampling["logprobs"] = req.top_logprobs or 0
        constraint = None
        if mode == "named":
            constraint = {"json": match[0].function.parameters or {"type": "object"}}
        elif mode == "required":
            constraint = {"json": _required_schema(req.tools)}
        elif req.response_format is not None:
            constraint = from_response_format(req.response_format.model_dump(by_alias=True))
        elif req.structured_outputs:
            constraint = validate_structured_outputs(req.structured_outputs)
        if constraint is not None:
            sampling["structured_outputs"] = constraint

        rid = request_id("chatcmpl")
        created = int(time.time())
        stream = self.gen.run(model, [prompt], [sampling], req.stream, req.logprobs, "chatcmpl")
        ctx = _Ctx(req, model.id, rid, created, mode, named, get_parser(self.tool_parser_name),
                   prompt.num_tokens)
        if req.stream:
            # Until the first token comes, the response has not started: watch the client
            # here, so that one who leaves meanwhile cancels too.
            stream = await until_disconnected(raw, primed(stream))
            return sse.EventStreamResponse(self._stream(ctx, stream))
        return await until_disconnected(raw, self._full(ctx, stream))

    async def _full(self, ctx: _Ctx, stream) -> Response:
        req, n = ctx.req, ctx.req.n
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
                if d.logprobs and req.logprobs:
                    lps[d.index].extend(chat_logprobs(d.logprobs, req.top_logprobs or 0))
        choices = []
        for i in range(n):
            content, calls, reason = ctx.finish(texts[i], reasons[i] or "stop")
            message = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = [c.to_openai() for c in calls]
            choices.append({"index": i, "message": message,
                            "logprobs": {"content": lps[i]} if req.logprobs else None,
                            "finish_reason": reason})
        c_tok = sum(counts)
        body = {"id": ctx.rid, "object": "chat.completion", "created": ctx.created,
                "model": ctx.model_id, "choices": choices,
                "usage": {"prompt_tokens": n_in, "completion_tokens": c_tok,
                          "total_tokens": n_in + c_tok}}
        return Response(sse.dumps(body), media_type="application/json")

    async def _stream(self, ctx: _Ctx, stream) -> AsyncIterator[bytes]:
        req, n = ctx.req, ctx.req.n
        head = {"id": ctx.rid, "object": "chat.completion.chunk", "created": ctx.created,
                "model": ctx.model_id}

        def event(index, delta, finish=None, logprobs=None):
            return sse.event(dict(head, choices=[{"index": index, "delta": delta,
                                                  "logprobs": logprobs, "finish_reason": finish}]))

        counts = [0] * n
        n_in = ctx.prompt_tokens or 0
        held = [""] * n  # text held back while it may still be a tool call
        holding = [ctx.mode in ("auto", "required")] * n
        try:
            for i in range(n):
                yield event(i, {"role": "assistant", "content": ""})
                if ctx.mode == "named":
                    yield event(i, {"tool_calls": [ctx.named_call(i).to_openai(0) | {
                        "function": {"name": ctx.named, "arguments": ""}}]})
            async for _, chunk in stream:
                if chunk.num_input_tokens is not None:
                    n_in = chunk.num_input_tokens
                for d in chunk.choices:
                    i = d.index
                    if d.num_output_tokens is not None:
                        counts[i] += d.num_output_tokens
                    lp = ({"content": chat_logprobs(d.logprobs, req.top_logprobs or 0)}
                          if d.logprobs and req.logprobs else None)
                    text = d.text
                    if holding[i]:
                        held[i] += text
                        text = ""
                        if ctx.mode == "auto" and not ctx.parser.may_be_call(held[i]):
                            holding[i], text, held[i] = False, held[i], ""
                    if d.finish_reason and holding[i]:
                        content, calls, reason = ctx.finish(held[i], d.finish_reason)
                        if calls:
                            yield event(i, {"tool_calls": [c.to_openai(k) for k, c in enumerate(calls)]},
                                        logprobs=lp)
                            yield event(i, {}, reason)
                            continue
                        text, d.finish_reason = content or "", reason
                    if ctx.mode == "named":
                        if text:
                            yield event(i, {"tool_calls": [{"index": 0, "function": {"arguments": text}}]},
                                        logprobs=lp)
                            lp = None
                        if d.finish_reason:
                            yield event(i, {}, d.finish_reason, lp)
                        continue
                    if text or d.finish_reason or lp:
                        yield event(i, {"content": text} if text else {}, d.finish_reason, lp)
            if req.stream_options and req.stream_options.include_usage:
                c_tok = sum(counts)
                yield sse.event(dict(head, choices=[], usage={
                    "prompt_tokens": n_in, "completion_tokens": c_tok, "total_tokens": n_in + c_tok}))
        except Exception as err:  # headers are sent: report the failure inside the stream
            e = from_triton(err) if isinstance(err, TritonError) else (
                err if isinstance(err, OpenAIError) else OpenAIError(str(err)))
            yield sse.event(e.body())
        finally:
            # Also on GeneratorExit (client gone): end the Triton request now, not at GC.
            await stream.aclose()
        yield sse.DONE


class _Ctx:
    """Per-request state that turns generated text into the assistant message."""

    def __init__(self, req, model_id, rid, created, mode, named, parser: ToolParser, prompt_tokens):
        self.req, self.model_id, self.rid, self.created = req, model_id, rid, created
        self.mode, self.named, self.parser, self.prompt_tokens = mode, named, parser, prompt_tokens
        self._named_calls: dict[int, ToolCall] = {}

    def named_call(self, index: int) -> ToolCall:
        if index not in self._named_calls:
            self._named_calls[index] = ToolCall(self.named, "")
        return self._named_calls[index]

    def finish(self, text: str, reason: str) -> tuple[str | None, list[ToolCall], str]:
        """(content, tool calls, finish_reason) for one finished choice."""
        if self.mode == "named":
            call = self.named_call(0)
            # OpenAI reports "stop" when the caller forced a named function.
            return None, [ToolCall(self.named, text, call.id)], reason
        if self.mode == "required":
            calls = _parse_required(text)
            return (None, calls, "tool_calls") if calls else (text, [], reason)
        if self.mode == "auto" and reason == "stop":
            content, calls = self.parser.parse(text)
            if calls:
                return content, calls, "tool_calls"
        return text, [], reason

"""The server-sent events of a streamed chat completion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from .. import sse
from ..responses import usage
from ..triton.vllm_io import ChoiceDelta, GenerationChunk
from .context import ChatContext
from .tools import HOLDING_MODES


@dataclass
class _Choice:
    holding: bool  # text is held back while it may still be a tool call
    held: str = ""
    completion_tokens: int = 0


class ChatStream:
    def __init__(self, ctx: ChatContext):
        self.ctx = ctx
        self.head = {"id": ctx.rid, "object": "chat.completion.chunk", "created": ctx.created,
                     "model": ctx.model_id}
        holding = ctx.tools.mode in HOLDING_MODES
        self.choices = [_Choice(holding) for _ in range(ctx.req.n)]
        self.prompt_tokens = ctx.prompt_tokens or 0

    def event(self, index: int, delta: dict, finish: str | None = None,
              logprobs: dict | None = None) -> bytes:
        return sse.event(dict(self.head, choices=[{"index": index, "delta": delta,
                                                   "logprobs": logprobs, "finish_reason": finish}]))

    def opening(self) -> list[bytes]:
        """Each choice's first event: the assistant's role (and a forced call's name)."""
        events = []
        for i in range(len(self.choices)):
            events.append(self.event(i, {"role": "assistant", "content": ""}))
            if self.ctx.tools.mode == "named":
                call = self.ctx.tools.named_call(i).to_openai(0)
                events.append(self.event(i, {"tool_calls": [
                    call | {"function": {"name": self.ctx.tools.named, "arguments": ""}}]}))
        return events

    def chunk(self, chunk: GenerationChunk) -> list[bytes]:
        if chunk.num_input_tokens is not None:
            self.prompt_tokens = chunk.num_input_tokens
        events = []
        for delta in chunk.choices:
            events += self._delta(delta)
        return events

    def usage(self) -> bytes:
        completion = sum(c.completion_tokens for c in self.choices)
        return sse.event(dict(self.head, choices=[],
                              usage=usage(self.prompt_tokens, completion)))

    def _delta(self, d: ChoiceDelta) -> list[bytes]:
        choice, i = self.choices[d.index], d.index
        if d.num_output_tokens is not None:
            choice.completion_tokens += d.num_output_tokens
        content = self.ctx.logprobs(d)
        lp = {"content": content} if content is not None else None
        text, finish = self._release(choice, d.text), d.finish_reason
        if finish and choice.holding:
            text, calls, finish = self.ctx.tools.finish(choice.held, finish)
            if calls:
                return [self.event(i, {"tool_calls": [c.to_openai(k) for k, c in enumerate(calls)]},
                                   logprobs=lp),
                        self.event(i, {}, finish)]
            text = text or ""
        if self.ctx.tools.mode == "named":
            return self._named_call_events(i, text, finish, lp)
        if text or finish or lp:
            return [self.event(i, {"content": text} if text else {}, finish, lp)]
        return []

    def _release(self, choice: _Choice, text: str) -> str:
        """The text to send now: none while the choice may still be a tool call."""
        if not choice.holding:
            return text
        choice.held += text
        if self.ctx.tools.mode == "auto" and not self.ctx.tools.parser.may_be_call(choice.held):
            text, choice.held, choice.holding = choice.held, "", False
            return text
        return ""

    def _named_call_events(self, i: int, text: str, finish: str | None,
                           lp: dict | None) -> list[bytes]:
        """A forced call streams its arguments as they are generated."""
        events = []
        if text:
            events.append(self.event(
                i, {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}, logprobs=lp))
            lp = None
        if finish:
            events.append(self.event(i, {}, finish, lp))
        return events


async def chat_events(ctx: ChatContext, stream: AsyncIterator) -> AsyncIterator[bytes]:
    """The events of a chat completion, from the engine's (prompt index, chunk) stream."""
    out = ChatStream(ctx)
    for event in out.opening():
        yield event
    async for _, chunk in stream:
        for event in out.chunk(chunk):
            yield event
    if ctx.req.stream_options and ctx.req.stream_options.include_usage:
        yield out.usage()

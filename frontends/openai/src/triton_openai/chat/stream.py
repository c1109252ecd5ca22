"""The server-sent events of a streamed chat completion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..conversation.decoding import ChoiceDecoder, Piece
from ..triton.feed import FeedEnd
from ..triton.vllm_io import ChoiceDelta, GenerationChunk
from ..web import sse
from ..web.answers import usage
from .context import ChatContext


@dataclass
class _Choice:
    decoder: ChoiceDecoder
    completion_tokens: int = 0


class ChatStream:
    def __init__(self, ctx: ChatContext):
        self.ctx = ctx
        self.head = {"id": ctx.rid, "object": "chat.completion.chunk", "created": ctx.created,
                     "model": ctx.model_id}
        self.choices = [_Choice(ctx.decoder.choice(i)) for i in range(ctx.req.n)]
        self.prompt_tokens = ctx.prompt_tokens or 0
        options = ctx.req.stream_options
        self.continuous_usage = bool(options and options.usage_in_every_chunk)

    def event(self, index: int, delta: dict, finish: str | None = None,
              logprobs: dict | None = None) -> bytes:
        body = dict(self.head, choices=[{"index": index, "delta": delta,
                                         "logprobs": logprobs, "finish_reason": finish}])
        if self.continuous_usage:
            body["usage"] = self._usage()
        return sse.event(body)

    def _usage(self) -> dict:
        return usage(self.prompt_tokens, sum(c.completion_tokens for c in self.choices))

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

    def encodable(self) -> bool:
        """Whether the backend can write this stream's events itself: one choice whose text
        goes out as it comes (no reasoning to split off, no tool calls to read, no
        logprobs, usage only at the end)."""
        req = self.ctx.req
        return (req.n == 1 and not req.logprobs and self.ctx.tools.mode == "none"
                and self.ctx.decoder.reasoning is None and not self.continuous_usage)

    def template(self) -> tuple[str, str, str]:
        """The event of a text delta, cut where the backend puts its text and finish."""
        body = dict(self.head, choices=[{"index": 0, "delta": {"content": ""},
                                         "logprobs": None, "finish_reason": None}])
        return sse.template(body, ("choices", 0, "delta", "content"),
                            ("choices", 0, "finish_reason"))

    def end(self, end: FeedEnd) -> None:
        if self.ctx.prompt_tokens is None:
            self.prompt_tokens = end.num_input_tokens
        self.choices[0].completion_tokens = end.num_output_tokens

    def usage(self) -> bytes:
        return sse.event(dict(self.head, choices=[], usage=self._usage()))

    def _delta(self, d: ChoiceDelta) -> list[bytes]:
        choice, i = self.choices[d.index], d.index
        if d.num_output_tokens is not None:
            choice.completion_tokens += d.num_output_tokens
        content = self.ctx.logprobs(d)
        lp = {"content": content} if content is not None else None
        piece = choice.decoder.feed(d.text, d.finish_reason)
        events = []
        if piece.reasoning:
            events.append(self.event(i, {"reasoning": piece.reasoning}, logprobs=lp))
            lp = None
        return events + self._answer_events(i, piece, lp)

    def _answer_events(self, i: int, piece: Piece, lp: dict | None) -> list[bytes]:
        text, finish = piece.content, piece.finish
        if piece.calls:
            return [*self._call_events(i, piece.calls, lp), self.event(i, {}, finish)]
        if self.ctx.tools.mode == "named":
            return self._named_call_events(i, text, finish, lp)
        if text or finish or lp:
            return [self.event(i, {"content": text} if text else {}, finish, lp)]
        return []

    def _call_events(self, i: int, calls, lp: dict | None) -> list[bytes]:
        """Tool calls as OpenAI streams them: each call's id, type and name (arguments
        empty) first, then its arguments."""
        events = []
        for k, call in enumerate(calls):
            head = call.to_openai(k)
            head["function"] = {"name": call.name, "arguments": ""}
            events.append(self.event(i, {"tool_calls": [head]}, logprobs=lp))
            lp = None
            events.append(self.event(i, {"tool_calls": [
                {"index": k, "function": {"arguments": call.arguments}}]}))
        return events

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


async def encoded_chat_events(out: ChatStream, stream: AsyncIterator) -> AsyncIterator[bytes]:
    """The events of an encodable chat completion (ChatStream.encodable), from
    GenerationService.events(): the backend's events as they are, the usage from the end."""
    for event in out.opening():
        yield event
    async for item in stream:
        if isinstance(item, bytes):
            yield item
        elif isinstance(item, FeedEnd):
            out.end(item)
        else:  # the backend answered on the request itself
            for event in out.chunk(item):
                yield event
    if out.ctx.req.stream_options and out.ctx.req.stream_options.include_usage:
        yield out.usage()

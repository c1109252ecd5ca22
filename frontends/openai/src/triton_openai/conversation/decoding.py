"""Generated text -> what an API sends: the reasoning split off, the answer held back while
it may still be a tool call, and the calls read at the finish.

Chat completions (streamed and whole) and the Responses API decode with this one class,
so a change to how reasoning or tool calls are read lands once for all of them.

    decoder = Decoder.of(tools, reasoning_parser, json_answer)
    choice = decoder.choice(index)                    # a streamed choice
    piece = choice.feed(delta_text, finish_reason)    # ... for every delta
    piece = decoder.whole(index, text, finish_reason) # a whole answer
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..reasoning import ReasoningParser
from ..tool_parsers import ToolCall
from .tools import HOLDING_MODES, ToolUse


@dataclass
class Piece:
    """What one step of a choice's text decodes to."""
    reasoning: str = ""  # reasoning to send now
    # Answer text to send now (under a named tool_choice: the call's arguments); a whole
    # answer that is all tool calls has None.
    content: str | None = ""
    began: bool = False  # answer text came, sent or held back: the reasoning is over
    calls: list[ToolCall] = field(default_factory=list)  # read at the finish
    finish: str | None = None  # "tool_calls" when calls were read


class ChoiceDecoder:
    """One streamed choice."""

    def __init__(self, tools: ToolUse, index: int, reasoning: ReasoningParser | None):
        self.tools = tools
        self.index = index
        self.thinking = reasoning.stream() if reasoning is not None else None
        self.holding = tools.mode in HOLDING_MODES
        self.held = ""
        self.finished = False

    def feed(self, text: str, finish: str | None = None) -> Piece:
        """One delta's text (and its finish reason, on the last)."""
        piece = Piece(finish=finish)
        if self.thinking is not None:
            piece.reasoning, text = self.thinking.feed(text, final=bool(finish))
        piece.began = bool(text)
        piece.content = self._release(text)
        if finish:
            self.finished = True
            if self.holding:
                content, piece.calls, piece.finish = self.tools.finish(
                    self.index, self.held, finish)
                self.held = ""
                piece.content = content or ""
        return piece

    def end(self, reason: str) -> Piece:
        """What is left when the stream ended without a finish reason."""
        return Piece() if self.finished else self.feed("", reason)

    def _release(self, text: str) -> str:
        """The text to send now: none while the choice may still be a tool call."""
        if not self.holding:
            return text
        self.held += text
        if self.tools.mode == "auto" and not self.tools.parser.may_be_call(self.held):
            text, self.held, self.holding = self.held, "", False
            return text
        return ""


class Decoder:
    """How one request's answers are decoded: its tool use and reasoning parser."""

    def __init__(self, tools: ToolUse, reasoning: ReasoningParser | None = None):
        self.tools = tools
        self.reasoning = reasoning

    @classmethod
    def of(cls, tools: ToolUse, reasoning: ReasoningParser | None, json_answer: bool) -> Decoder:
        """With `reasoning` unless the answer is JSON from its first token (a forced tool
        call, or a JSON format): then there is no reasoning to split off."""
        if tools.constraint is not None or json_answer:
            reasoning = None
        return cls(tools, reasoning)

    def choice(self, index: int) -> ChoiceDecoder:
        return ChoiceDecoder(self.tools, index, self.reasoning)

    def whole(self, index: int, text: str, reason: str) -> Piece:
        """A whole answer: its reasoning, content and calls.  Unlike a stream, nothing has
        been sent yet, so calls are looked for in all of it."""
        thought, text = self.reasoning.split(text) if self.reasoning else ("", text)
        content, calls, reason = self.tools.finish(index, text, reason)
        return Piece(reasoning=thought, content=content, began=bool(text), calls=calls,
                     finish=reason)

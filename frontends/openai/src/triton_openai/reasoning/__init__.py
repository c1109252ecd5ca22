"""Split a reasoning model's text into its reasoning and its answer.

    parser = get_parser("deepseek_r1")
    reasoning, content = parser.split(text)          # a complete answer
    stream = parser.stream()                         # a streamed one
    reasoning_delta, content_delta = stream.feed(delta_text)
    ...; stream.feed("", final=True)

Parsers, by `--reasoning-parser` name:
  deepseek_r1   reasoning up to </think> (the template may have written <think>); no
                </think> at all: everything is reasoning (the budget ran out thinking)
  qwen3         <think>...</think> when the answer starts with <think>; else all content

Shared by every API surface that reports reasoning (chat completions' `reasoning`,
the Responses API's reasoning items).  A new convention is a ReasoningParser passed to
`register`.
"""

from .base import ReasoningParser, ReasoningStream, get_parser, parser_names, register

__all__ = ["ReasoningParser", "ReasoningStream", "get_parser", "parser_names", "register"]

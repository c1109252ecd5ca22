from __future__ import annotations


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that begins `tag` (held back while streaming)."""
    for k in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class ReasoningParser:
    """The <think>...</think> family; subclasses set the tags and whether the answer
    must open with the start tag for reasoning to be there at all."""

    name = ""
    start = "<think>"
    end = "</think>"
    start_required = False

    def split(self, text: str, final: bool = True) -> tuple[str, str]:
        """(reasoning, content) of `text`.  With final=False, the end of `text` that may
        still become a tag belongs to neither yet."""
        lead = text.lstrip()
        if lead.startswith(self.start):
            body = lead[len(self.start):]
        elif not final and (lead == "" or self.start.startswith(lead)):
            return "", ""  # may yet open with the start tag
        elif self.start_required:
            return "", text
        else:
            body = text
        at = body.find(self.end)
        if at >= 0:
            return body[:at], body[at + len(self.end):]
        if final:
            return body, ""
        return body[:len(body) - _partial_suffix(body, self.end)], ""

    def stream(self) -> ReasoningStream:
        return ReasoningStream(self)


class ReasoningStream:
    """One streamed choice: feed each text delta, get (reasoning delta, content delta)."""

    def __init__(self, parser: ReasoningParser):
        self.parser = parser
        self.text = ""
        self._sent = (0, 0)

    def feed(self, delta: str, final: bool = False) -> tuple[str, str]:
        self.text += delta
        reasoning, content = self.parser.split(self.text, final)
        sent_r, sent_c = self._sent
        self._sent = (max(sent_r, len(reasoning)), max(sent_c, len(content)))
        return reasoning[sent_r:], content[sent_c:]


class DeepSeekR1Parser(ReasoningParser):
    name = "deepseek_r1"


class Qwen3Parser(ReasoningParser):
    name = "qwen3"
    start_required = True


_PARSERS: dict[str, type[ReasoningParser]] = {}


def register(parser: type[ReasoningParser]) -> type[ReasoningParser]:
    """Make a parser available to --reasoning-parser under its name."""
    _PARSERS[parser.name] = parser
    return parser


for _parser in (DeepSeekR1Parser, Qwen3Parser):
    register(_parser)


def parser_names() -> list[str]:
    return sorted(_PARSERS)


def get_parser(name: str) -> ReasoningParser:
    try:
        return _PARSERS[name]()
    except KeyError:
        raise ValueError(f"unknown reasoning parser {name!r}; choose from {sorted(_PARSERS)}") from None

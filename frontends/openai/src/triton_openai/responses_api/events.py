"""One response as it is generated: the `response` object, and the Responses events that
describe each step (the stream sends them; a plain answer only keeps the object).

Event order, as OpenAI sends it:
    response.created, response.in_progress
    reasoning:    output_item.added, content_part.added, reasoning_text.delta*,
                  reasoning_text.done, content_part.done, output_item.done
                  (with a reasoning parser; before the answer's items)
    per message:  output_item.added, content_part.added, output_text.delta*,
                  output_text.done, content_part.done, output_item.done
    per call:     output_item.added, function_call_arguments.delta*,
                  function_call_arguments.done, output_item.done
    response.completed (or response.incomplete when max_output_tokens cut it short)
"""

from __future__ import annotations

import uuid
from typing import Any

from ..conversation.decoding import Decoder, Piece
from ..tool_parsers import ToolCall
from ..triton.vllm_io import GenerationChunk

Event = dict[str, Any]


def _item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage(input_tokens: int, output_tokens: int) -> dict:
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


class ResponseBuilder:
    def __init__(self, response: dict, decoder: Decoder, prompt_tokens: int | None):
        self.response = response  # the object GET returns; updated in place
        self.tools = decoder.tools
        self.decoder = decoder.choice(0)  # n is always 1
        self.calls: list[ToolCall] = []  # read from held-back text, sent at the finish
        self.reasoning: dict | None = None  # the reasoning item, open or closed
        self.reasoning_open = False
        self.thought = ""
        self.seq = 0
        self.input_tokens = prompt_tokens or 0
        self.output_tokens = 0
        self.message: dict | None = None  # the open message item
        self.text = ""
        self.call: dict | None = None  # the open call item of a named tool_choice
        self.finish_reason: str | None = None

    # --- events -------------------------------------------------------------------
    def _event(self, kind: str, **fields) -> Event:
        event = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return event

    def _snapshot(self, kind: str) -> Event:
        return self._event(kind, response=dict(self.response, output=list(self.response["output"])))

    def start(self) -> list[Event]:
        self.response["status"] = "in_progress"
        return [self._snapshot("response.created"), self._snapshot("response.in_progress")]

    def chunk(self, chunk: GenerationChunk) -> list[Event]:
        if chunk.num_input_tokens is not None:
            self.input_tokens = chunk.num_input_tokens
        events: list[Event] = []
        for d in chunk.choices:  # one choice: n is always 1
            if d.num_output_tokens is not None:
                self.output_tokens += d.num_output_tokens
            if d.finish_reason:
                self.finish_reason = d.finish_reason
            events += self._answer(self.decoder.feed(d.text, d.finish_reason))
        return events

    def _answer(self, piece: Piece) -> list[Event]:
        """One decoded piece: its reasoning to the reasoning item, the rest to the message
        or call."""
        events = self._reason(piece.reasoning)
        if piece.began:
            events += self._close_reasoning()  # the answer has begun: thinking is over
        self.calls += piece.calls
        if self.tools.mode == "named":
            return events + self._call_text(piece.content)
        return events + self._text(piece.content)

    def finish(self) -> list[Event]:
        """Close the open items, add held-back calls, and end the response."""
        reason = self.finish_reason or "stop"
        events = self._answer(self.decoder.end(reason))
        events += self._close_reasoning(at_finish=True)
        if self.tools.mode == "named":
            events += self._call_text("")
            events += self._close_call(self.call)
        elif self.message is not None or not (self.calls or self.reasoning):
            events += self._text("", force_open=True)
            events += self._close_message()
        for call in self.calls:
            item, added = self._open_call(call.name, call.id)
            events += [added, *self._call_deltas(item, call.arguments)]
            events += self._close_call(item)
        incomplete = reason == "length"
        self.response.update(
            status="incomplete" if incomplete else "completed",
            incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
            usage=usage(self.input_tokens, self.output_tokens))
        events.append(self._snapshot("response.incomplete" if incomplete
                                     else "response.completed"))
        return events

    def cancelled(self) -> None:
        self.response.update(status="cancelled",
                             usage=usage(self.input_tokens, self.output_tokens))

    def failed(self, error: dict) -> list[Event]:
        self.response.update(status="failed", error={"code": error.get("code") or "server_error",
                                                     "message": error["message"]})
        return [self._snapshot("response.failed")]

    # --- messages -----------------------------------------------------------------
    def _text(self, text: str, force_open: bool = False) -> list[Event]:
        events: list[Event] = []
        if not text and not force_open:
            return events
        if self.message is None:
            self.message = {"id": _item_id("msg"), "type": "message", "status": "in_progress",
                            "role": "assistant", "content": []}
            events += self._added(self.message)
            events.append(self._event("response.content_part.added", item_id=self.message["id"],
                                      output_index=self._index(self.message), content_index=0,
                                      part=self._part("")))
        if text:
            self.text += text
            self.message["content"] = [self._part(self.text)]  # what GET shows meanwhile
            events.append(self._event("response.output_text.delta", item_id=self.message["id"],
                                      output_index=self._index(self.message), content_index=0,
                                      delta=text, logprobs=[]))
        return events

    def _close_message(self) -> list[Event]:
        item, where = self.message, {"item_id": self.message["id"],
                                     "output_index": self._index(self.message), "content_index": 0}
        part = self._part(self.text)
        item["content"] = [part]
        item["status"] = self._item_status()
        return [self._event("response.output_text.done", **where, text=self.text, logprobs=[]),
                self._event("response.content_part.done", **where, part=part),
                self._event("response.output_item.done", output_index=where["output_index"],
                            item=dict(item))]

    @staticmethod
    def _part(text: str) -> dict:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    # --- reasoning ----------------------------------------------------------------
    def _reason(self, text: str) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self.reasoning is None:
            self.reasoning = {"id": _item_id("rs"), "type": "reasoning", "status": "in_progress",
                              "summary": [], "content": []}
            self.reasoning_open = True
            events += self._added(self.reasoning)
            events.append(self._event("response.content_part.added", **self._where(self.reasoning),
                                      part=self._reasoning_part("")))
        self.thought += text
        self.reasoning["content"] = [self._reasoning_part(self.thought)]
        events.append(self._event("response.reasoning_text.delta", **self._where(self.reasoning),
                                  delta=text))
        return events

    def _close_reasoning(self, at_finish: bool = False) -> list[Event]:
        if not self.reasoning_open:
            return []
        self.reasoning_open = False
        item, where = self.reasoning, self._where(self.reasoning)
        part = self._reasoning_part(self.thought)
        item["content"] = [part]
        # Closed because the answer began: complete, whatever happens to the answer; at the
        # finish, cut short when the budget ran out while thinking.
        item["status"] = self._item_status() if at_finish else "completed"
        return [self._event("response.reasoning_text.done", **where, text=self.thought),
                self._event("response.content_part.done", **where, part=part),
                self._event("response.output_item.done", output_index=where["output_index"],
                            item=dict(item))]

    def _where(self, item: dict) -> dict:
        return {"item_id": item["id"], "output_index": self._index(item), "content_index": 0}

    @staticmethod
    def _reasoning_part(text: str) -> dict:
        return {"type": "reasoning_text", "text": text}

    # --- function calls -----------------------------------------------------------
    def _open_call(self, name: str, call_id: str) -> tuple[dict, Event]:
        item = {"id": _item_id("fc"), "type": "function_call", "status": "in_progress",
                "call_id": call_id, "name": name, "arguments": ""}
        return item, self._added(item)[0]

    def _call_text(self, text: str) -> list[Event]:
        """A forced call streams its arguments as they are generated."""
        events: list[Event] = []
        if self.call is None:
            self.call, added = self._open_call(self.tools.named, self.tools.named_call(0).id)
            events.append(added)
        return events + self._call_deltas(self.call, text)

    def _call_deltas(self, item: dict, arguments: str) -> list[Event]:
        if not arguments:
            return []
        item["arguments"] += arguments
        return [self._event("response.function_call_arguments.delta", item_id=item["id"],
                            output_index=self._index(item), delta=arguments)]

    def _close_call(self, item: dict) -> list[Event]:
        item["status"] = self._item_status()
        where = {"item_id": item["id"], "output_index": self._index(item)}
        return [self._event("response.function_call_arguments.done", **where, name=item["name"],
                            arguments=item["arguments"]),
                self._event("response.output_item.done", output_index=where["output_index"],
                            item=dict(item))]

    # --- both -----------------------------------------------------------------------
    def _added(self, item: dict) -> list[Event]:
        self.response["output"].append(item)
        return [self._event("response.output_item.added", output_index=self._index(item),
                            item=dict(item, content=[]) if "content" in item else dict(item))]

    def _index(self, item: dict) -> int:
        return next(i for i, it in enumerate(self.response["output"]) if it is item)

    def _item_status(self) -> str:
        return "incomplete" if self.finish_reason == "length" else "completed"

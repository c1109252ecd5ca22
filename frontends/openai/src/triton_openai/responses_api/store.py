"""Responses kept for GET /v1/responses/{id}, previous_response_id and cancel: the most
recently used `max_entries` of them, in memory (a restart forgets them)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from ..conversation.messages import ChatMessage
from ..web.errors import NotFoundError


@dataclass
class StoredResponse:
    response: dict  # the response object, updated in place while it is generated
    messages: list[ChatMessage]  # the conversation it answered (without instructions)
    task: asyncio.Task | None = None  # the generation, while it runs


class ResponseStore:
    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, entry: StoredResponse) -> None:
        if self.max_entries <= 0:
            return
        self._entries[entry.response["id"]] = entry
        self._entries.move_to_end(entry.response["id"])
        while len(self._entries) > self.max_entries:
            _, evicted = self._entries.popitem(last=False)
            # A background response that nobody can GET or cancel any more is stopped (a
            # stream of it ends then); a foreground one goes on for the request waiting
            # for it, only its record goes.
            if (evicted.response.get("background") and evicted.task is not None
                    and not evicted.task.done()):
                evicted.task.cancel()

    def get(self, response_id: str, param: str | None = None) -> StoredResponse:
        entry = self._entries.get(response_id)
        if entry is None:
            raise NotFoundError(f"Response with id {response_id!r} not found (responses are kept "
                                f"in memory, the {self.max_entries} most recently used).",
                                param=param)
        self._entries.move_to_end(response_id)
        return entry

"""The logic of /v1/responses: the prompt (stored conversation, instructions, input and
tools through the chat template), one generation task per response, its events, the store
and cancellation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import Response

from ..config import FrontendConfig
from ..conversation.messages import ChatMessage
from ..conversation.preparation import ConversationPreparation
from ..generation.fanin import primed
from ..generation.service import GenerationService
from ..generation.structured import from_response_format
from ..shutdown import Drain
from ..triton.vllm_contract import GENERATE
from ..web import sse
from ..web.answers import json_response
from ..web.errors import BadRequestError, TooManyRequestsError, as_openai_error
from ..web.request_ids import new_id
from .events import Event, ResponseBuilder
from .items import ToolRequest, input_messages, output_messages
from .protocol import ResponsesRequest
from .store import ResponseStore, StoredResponse

_END = None


def encode(event: Event) -> bytes:
    # Serialized at once: the items an event shows go on changing as generation goes on.
    return b"event: " + event["type"].encode() + b"\n" + sse.event(event)


class ResponseRun:
    """The task that drives one response's generation, so that a cancel request (or the
    client leaving) can stop it from outside, and a background response runs on its own."""

    def __init__(self, builder: ResponseBuilder, stream: AsyncIterator, streamed: bool):
        self.builder = builder
        self.queue: asyncio.Queue | None = asyncio.Queue() if streamed else None
        self.error: Exception | None = None
        self.task = asyncio.create_task(self._drive(stream))

    def _emit(self, events: list[Event]) -> None:
        if self.queue is not None:
            for event in events:
                self.queue.put_nowait(encode(event))

    async def _drive(self, stream: AsyncIterator) -> dict:
        try:
            self._emit(self.builder.start())
            async for _, chunk in stream:
                self._emit(self.builder.chunk(chunk))
            self._emit(self.builder.finish())
        except asyncio.CancelledError:
            self.builder.cancelled()  # a cancel request, or a client gone: not an error
        except Exception as err:  # recorded on the response, which a later GET shows
            self.error = err
            self._emit(self.builder.failed(as_openai_error(err).body()["error"]))
        finally:
            await stream.aclose()  # ends the Triton request, also when cancelled
            if self.queue is not None:
                self.queue.put_nowait(_END)
        return self.builder.response

    async def events(self, keep_running: bool) -> AsyncIterator[bytes]:
        try:
            while (event := await self.queue.get()) is not _END:
                yield event
        finally:
            if not keep_running:
                self.task.cancel()  # the client left a stream that only it was reading


def _format_constraint(req: ResponsesRequest) -> dict | None:
    fmt = req.text.format if req.text is not None else None
    if fmt is None:
        return None
    if fmt.type == "json_schema" and not isinstance(fmt.json_schema, dict):
        raise BadRequestError("text.format.schema must be a JSON schema object",
                              param="text.format.schema")
    return from_response_format({"type": fmt.type, "json_schema": {"schema": fmt.json_schema}})


class ResponsesServing:
    def __init__(self, generation: GenerationService, chat_template: str | None = None,
                 tool_parser: str = "llama3_json", store_size: int = 1000,
                 reasoning_parser: str | None = None,
                 max_background: int = FrontendConfig.max_background_responses,
                 drain: Drain | None = None):
        self.gen = generation
        self.conversation = ConversationPreparation(generation, chat_template, tool_parser,
                                                    reasoning_parser)
        self.store = ResponseStore(store_size)
        self.max_background = max_background
        self.drain = drain
        self.background: set[asyncio.Task] = set()  # background generations running

    async def create(self, req: ResponsesRequest) -> Response:
        for param, why in req.rejections():
            raise BadRequestError(why, param=param)
        if req.background:
            self._check_background_room()  # before the prompt's work, and again below
        model = await self.gen.catalog.get(req.model, runner=GENERATE)
        messages = self._history(req.previous_response_id) + input_messages(req.input)
        tool_req = ToolRequest.of(req.tools, req.tool_choice, req.parallel_tool_calls)
        tools = self.conversation.tools(tool_req)
        instructions = [] if req.instructions is None else [
            ChatMessage(role="system", content=req.instructions)]
        prompt = await self.conversation.prompt(model, instructions + messages, tools,
                                                tool_req.tools)
        sampling = self.gen.sampling(
            model, prompt, req.sampling_dict(), max_tokens=req.max_output_tokens,
            max_tokens_param="max_output_tokens", prompt_param="input",
            # Forced tool calls first, then text.format (as in chat completions).
            constraint=tools.constraint or _format_constraint(req),
            structured_outputs=req.structured_outputs)

        fmt = req.text.format if req.text is not None else None
        decoder = self.conversation.decoder(tools,
                                            json_answer=fmt is not None and fmt.type != "text")
        response = self._response_object(req, model.id)
        builder = ResponseBuilder(response, decoder, prompt.num_tokens)
        # Background responses stream from Triton too, so that GET shows their progress.
        stream = self.gen.run(model, [prompt], [sampling], req.stream or bool(req.background),
                              False)
        if req.stream and not req.background:
            stream = await primed(stream)  # Triton's refusal becomes the HTTP status
        if req.background:
            self._check_background_room()  # nothing awaited from here to the count
        run = ResponseRun(builder, stream, req.stream)
        if req.background:
            self._track_background(run.task, response["id"])
        if req.store:
            self.store.put(StoredResponse(response, messages, run.task))
        if req.stream:
            return sse.EventStreamResponse(run.events(keep_running=bool(req.background)))
        if req.background:
            return json_response(dict(response))
        await run.task
        if run.error is not None:
            raise run.error
        return json_response(response)

    def _check_background_room(self) -> None:
        if len(self.background) >= self.max_background:
            raise TooManyRequestsError(
                f"{len(self.background)} background responses are running, as many as the "
                f"server runs at once; try again when one has ended.", param="background",
                code="too_many_background_responses")

    def _track_background(self, task: asyncio.Task, response_id: str) -> None:
        """Count a background generation until it ends; the shutdown's drain waits for it
        as for a request in flight, and cancels it when the grace period is over."""
        self.background.add(task)
        record = (self.drain.enter("POST", f"/v1/responses (background {response_id})",
                                   "-", task)
                  if self.drain is not None else None)

        def ended(_: asyncio.Task) -> None:
            self.background.discard(task)
            if record is not None:
                self.drain.leave(record)

        task.add_done_callback(ended)

    def retrieve(self, response_id: str) -> Response:
        return json_response(self.store.get(response_id).response)

    async def cancel(self, response_id: str) -> Response:
        """Stop a response in progress; one that has ended is returned as it is."""
        entry = self.store.get(response_id)
        if entry.task is not None and not entry.task.done():
            entry.task.cancel()
            await asyncio.wait({entry.task})
        return json_response(entry.response)

    def _history(self, previous_id: str | None) -> list[ChatMessage]:
        if previous_id is None:
            return []
        entry = self.store.get(previous_id, param="previous_response_id")
        status = entry.response["status"]
        if status in ("queued", "in_progress"):
            raise BadRequestError(f"previous response {previous_id!r} is still {status}",
                                  param="previous_response_id")
        return entry.messages + output_messages(entry.response["output"])

    @staticmethod
    def _response_object(req: ResponsesRequest, model_id: str) -> dict[str, Any]:
        fmt = {"type": "text"}
        if req.text is not None and req.text.format is not None:
            fmt = req.text.format.model_dump(by_alias=True, exclude_none=True)
        return {
            # Unique, not made from X-Request-Id: it keys the store, and clients may reuse
            # their request ids.
            "id": f"resp-{new_id()}", "object": "response", "created_at": int(time.time()),
            "status": "queued", "background": bool(req.background), "error": None,
            "incomplete_details": None, "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens, "model": model_id, "output": [],
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "previous_response_id": req.previous_response_id,
            "reasoning": {"effort": None, "summary": None}, "store": req.store,
            "temperature": req.temperature, "text": {"format": fmt},
            "tool_choice": req.tool_choice or "auto", "tools": req.tools or [],
            "top_p": req.top_p, "truncation": "disabled", "usage": None, "user": req.user,
            "metadata": req.metadata or {}}


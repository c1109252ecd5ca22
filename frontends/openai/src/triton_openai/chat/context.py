"""What one chat completion carries from the request to its answer."""

from __future__ import annotations

from dataclasses import dataclass

from ..conversation.decoding import Decoder
from ..conversation.tools import ToolUse
from ..generation.logprobs import chat_logprobs
from ..triton.vllm_io import ChoiceDelta
from .protocol import ChatCompletionRequest


@dataclass
class ChatContext:
    req: ChatCompletionRequest
    model_id: str
    rid: str
    created: int
    decoder: Decoder  # splits off reasoning, reads tool calls
    prompt_tokens: int | None  # None when the backend counts them

    @property
    def tools(self) -> ToolUse:
        return self.decoder.tools

    def logprobs(self, delta: ChoiceDelta) -> list[dict] | None:
        """OpenAI's logprobs `content` for a delta, when the request asked for them."""
        if delta.logprobs and self.req.logprobs:
            return chat_logprobs(delta.logprobs, self.req.top_logprobs or 0)
        return None

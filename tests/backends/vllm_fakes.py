"""Stand-ins for vLLM's output objects, as far as the backend reads them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:
    logprob: float
    rank: int
    decoded_token: str


@dataclass
class Choice:  # vLLM's CompletionOutput
    index: int
    text: str
    token_ids: list
    cumulative_logprob: float | None = None
    logprobs: list | None = None
    finish_reason: str | None = None


@dataclass
class Result:  # vLLM's RequestOutput
    outputs: list
    prompt_token_ids: list = field(default_factory=lambda: [1, 2, 3])
    finished: bool = True
    prompt: str = ""


@dataclass
class Pooled:
    data: list


@dataclass
class PoolingResult:  # vLLM's PoolingRequestOutput
    outputs: Pooled
    prompt_token_ids: list

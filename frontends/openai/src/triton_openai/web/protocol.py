"""Pydantic models shared by the API surfaces: the base of every request body (unknown
fields accepted, text checked), the error body of the API schema, and the sampling fields
of completions and chat completions.  Each endpoint builds its request models on them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..text.printable import printable
from ..text.surrogates import lone_surrogate_at
from .errors import BadRequestError


class OpenAIBaseModel(BaseModel):
    # Unknown fields are accepted and ignored, as OpenAI's API does for forward
    # compatibility with newer clients.
    model_config = ConfigDict(extra="allow")


def valid_unicode(data: Any) -> Any:
    """A request's parsed JSON, refused with a 400 if any text in it is not Unicode
    (text/surrogates.py); for the `mode="before"` validator of each request model."""
    where = lone_surrogate_at(data)
    if where is not None:
        where = printable(where)  # a key can be where the surrogate is
        raise BadRequestError(
            f"{where or 'the request body'} holds a lone UTF-16 surrogate (an unpaired "
            "\\ud800-\\udfff escape), which is not text", param=where or None)
    return data


class RequestBody(OpenAIBaseModel):
    """The body of a request (a model nested in one is checked with it)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return valid_unicode(data)


class StreamOptions(OpenAIBaseModel):
    include_usage: bool | None = Field(
        default=False, description="Send a last chunk with the request's token usage.")
    # --- vLLM extension ------------------------------------------------------------
    continuous_usage_stats: bool | None = Field(
        default=False, description="vLLM: with include_usage, every chunk carries the usage so far.")

    @property
    def usage_in_every_chunk(self) -> bool:
        return bool(self.include_usage and self.continuous_usage_stats)


class ErrorInfo(BaseModel):
    message: str = Field(description="What went wrong, for a person to read.")
    type: str = Field(description="invalid_request_error, rate_limit_error, server_error or service_unavailable.")
    param: str | None = Field(default=None, description="The request parameter at fault.")
    code: str | None = Field(default=None, description="e.g. model_not_found, context_length_exceeded.")


class ErrorResponse(BaseModel):
    """The body of every failure (errors.py makes them)."""
    error: ErrorInfo


# For `responses=` of the routes: the error statuses they answer with, in the API schema.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in ((400, "The request is invalid."),
                                (401, "No or a wrong API key."),
                                (404, "No such model."),
                                (413, "The request body is too large."),
                                (500, "The server or the engine failed."),
                                (503, "Triton cannot be reached."))}


class SamplingFields(RequestBody):
    """Sampling parameters common to completions and chat completions."""

    # --- OpenAI fields ---------------------------------------------------------
    model: str = Field(description="Model id from /v1/models.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature; 0 is greedy.")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    n: int = Field(default=1, ge=1, le=128, description="Number of choices to generate.")
    stream: bool = Field(default=False, description="Stream the answer as server-sent events.")
    stream_options: StreamOptions | None = Field(default=None, description="Streaming options.")
    stop: str | list[str] | None = Field(default=None, description="Up to 4 stop sequences.")
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, description="Presence penalty.")
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, description="Frequency penalty.")
    seed: int | None = Field(default=None, description="Seed for reproducible sampling.")
    user: str | None = Field(default=None, description="End-user id (accepted, not used).")
    logit_bias: dict[str, float] | None = Field(default=None, description="Token id -> bias.")

    # --- vLLM extensions ---------------------------------------------------------
    top_k: int | None = Field(default=None, description="vLLM: top-k sampling (-1 or 0 = off).")
    min_p: float | None = Field(default=None, ge=0, le=1, description="vLLM: min-p sampling.")
    repetition_penalty: float | None = Field(default=None, gt=0, description="vLLM: repetition penalty.")
    min_tokens: int | None = Field(default=None, ge=0, description="vLLM: minimum tokens before a stop.")
    ignore_eos: bool | None = Field(default=None, description="vLLM: keep generating past EOS.")
    skip_special_tokens: bool | None = Field(default=None, description="vLLM: drop special tokens from text.")
    stream_interval: int | None = Field(
        default=None, ge=1, description="vLLM: tokens per streamed chunk (the first and the last "
                                        "are sent at once); without it the server picks one "
                                        "from its load, 1 asks for every token as it comes.")
    priority: int | None = Field(
        default=None, description="vLLM: scheduling priority, lower runs first; only for models "
                                  "whose model.json sets scheduling_policy: priority (else 400).")

    @model_validator(mode="after")
    def _stream_options_need_stream(self):
        if self.stream_options is not None and not self.stream:
            raise BadRequestError("stream_options is only allowed with stream: true",
                                  param="stream_options")
        return self

    def sampling_dict(self) -> dict[str, Any]:
        """The SamplingParams keys this request sets (unset ones keep vLLM's defaults)."""
        out: dict[str, Any] = {"n": self.n}
        for key in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty",
                    "top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos",
                    "skip_special_tokens", "priority", "stream_interval"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.stop:
            out["stop"] = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        if self.logit_bias:
            try:
                out["logit_bias"] = {int(k): v for k, v in self.logit_bias.items()}
            except ValueError:
                raise BadRequestError("logit_bias keys must be token ids", param="logit_bias") from None
        return out


"""Frontend settings, filled by the CLI (or by tests that build the app directly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FrontendConfig:
    triton_url: str | None = "localhost:8001"
    triton_metrics_url: str | None = "http://localhost:8002/metrics"
    # A Triton to run in this process (triton/inprocess_client.ServerSettings), instead of
    # the one at triton_url.
    in_process: Any = None
    host: str = "0.0.0.0"
    port: int = 9000
    # Bearer key required on /v1/* when set.
    api_key: str | None = None
    # Triton model name -> the name(s) shown to clients (the first is listed first).
    served_model_names: dict[str, str | list[str]] = field(default_factory=dict)
    chat_template: str | None = None  # template text (the CLI reads the file)
    tokenizer: str | None = None  # path or name that overrides the model's own
    cors_origins: list[str] = field(default_factory=list)
    max_request_bytes: int = 10 * 1024 * 1024
    # Most prompts x n of one /v1/completions request, and inputs of one /v1/embeddings
    # request: each is a Triton request of its own.  2048 is OpenAI's own limit on an
    # embeddings input array.
    max_batch_inputs: int = 2048
    log_format: str = "text"  # "text" or "json" access logs
    tool_call_parser: str = "llama3_json"
    reasoning_parser: str | None = None
    # Sampling defaults: "auto" (each model's generation_config.json), "vllm" (none) or a folder.
    generation_config: str = "auto"
    # JSON under structured outputs without free whitespace, unless a request says otherwise.
    compact_json: bool = False
    # How many responses /v1/responses keeps for GET and previous_response_id (LRU).
    responses_store_size: int = 1000
    # How many `background: true` responses may run at once; more are refused (429).
    max_background_responses: int = 64
    # Seconds that in-flight streams get to finish on shutdown.
    shutdown_timeout: float = 30.0
    # Seconds an idle keep-alive connection stays open.  Longer than the idle expiry of
    # HTTP clients (httpx, the OpenAI SDK: 5 s) and of load balancers (60 s): a server that
    # closes first races the client's next request on that connection, which then fails
    # with "Server disconnected without sending a response" (uvicorn's default is 5 s).
    keep_alive_timeout: float = 75.0
    # One-choice streams go on their model's feed (triton/feed.py) where the transport
    # carries one: one Triton response per engine step for all of them, encoded once.
    stream_feeds: bool = True
    # Seconds between health checks of each served model (health/model_watch.py); 0 turns
    # the watch off.  A dead model is found within about this plus Triton's answer.
    model_health_interval: float = 0.5

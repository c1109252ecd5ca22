"""Frontend settings, filled by the CLI (or by tests that build the app directly)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FrontendConfig:
    triton_url: str | None = "localhost:8001"
    triton_metrics_url: str | None = "http://localhost:8002/metrics"
    host: str = "0.0.0.0"
    port: int = 9000
    # Bearer key required on /v1/* when set.
    api_key: str | None = None
    # Triton model name -> name shown to clients.
    served_model_names: dict[str, str] = field(default_factory=dict)
    chat_template: str | None = None  # template text (the CLI reads the file)
    tokenizer: str | None = None  # path or name that overrides the model's own
    cors_origins: list[str] = field(default_factory=list)
    max_request_bytes: int = 10 * 1024 * 1024
    log_format: str = "text"  # "text" or "json" access logs
    tool_call_parser: str = "llama3_json"
    # How many responses /v1/responses keeps for GET and previous_response_id (LRU).
    responses_store_size: int = 1000
    model_repository: str | None = None
    in_process: bool = False
    # Seconds that in-flight streams get to finish on shutdown.
    shutdown_timeout: float = 30.0

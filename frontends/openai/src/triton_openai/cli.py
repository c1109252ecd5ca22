"""`triton-openai`: parse flags, build the app, run it under uvicorn."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .config import FrontendConfig
from .reasoning import parser_names as reasoning_parser_names
from .tool_parsers import parser_names as tool_parser_names

API_KEY_ENV = "TRITON_OPENAI_API_KEY"
SHUTDOWN_TIMEOUT_ENV = "TRITON_OPENAI_SHUTDOWN_TIMEOUT"
KEEP_ALIVE_ENV = "TRITON_OPENAI_TIMEOUT_KEEP_ALIVE"


def _seconds(value: str) -> float:
    """The number given, NaN for words (which every bound below then refuses)."""
    try:
        return float(value)
    except ValueError:
        return float("nan")


def positive_seconds(value: str) -> float:
    seconds = _seconds(value)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"a number of seconds above 0, not {value!r}")
    return seconds


def seconds_or_off(value: str) -> float:
    seconds = _seconds(value)
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"a number of seconds (0 for off), not {value!r}")
    return seconds


def parse_served_names(values: list[str]) -> dict[str, list[str]]:
    """TRITON=NAME[,ALIAS...], repeatable: a model's public names, in the order given."""
    out: dict[str, list[str]] = {}
    for v in values:
        triton, sep, publics = v.partition("=")
        names = [n.strip() for n in publics.split(",")]
        if not sep or not triton or not all(names):
            raise argparse.ArgumentTypeError(
                f"--served-model-name takes TRITON_MODEL=PUBLIC_NAME[,ALIAS...], not {v!r}")
        out.setdefault(triton, []).extend(n for n in names if n not in out.get(triton, []))
    return out


def build_parser() -> argparse.ArgumentParser:
    # Defaults are FrontendConfig's, so that the command and build_app() agree.
    d = FrontendConfig()
    p = argparse.ArgumentParser(
        prog="triton-openai",
        description="OpenAI-compatible HTTP API for Triton models served by the vLLM backend.")
    p.add_argument("--triton-url", default=d.triton_url,
                   help="Triton's KServe gRPC endpoint HOST:PORT (or grpc://HOST:PORT), or its "
                        "HTTP endpoint http://HOST:PORT (default: %(default)s)")
    p.add_argument("--triton-metrics-url", default=d.triton_metrics_url,
                   help="Triton's Prometheus page, appended to /metrics; '' to leave it out "
                        "(default: %(default)s)")
    p.add_argument("--host", default=d.host, help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=d.port, help="port to listen on (default: %(default)s)")
    p.add_argument("--api-key", default=d.api_key,
                   help=f"require `Authorization: Bearer KEY` on /v1/* (or set ${API_KEY_ENV})")
    p.add_argument("--served-model-name", action="append", default=[],
                   metavar="TRITON=PUBLIC[,ALIAS...]",
                   help="serve Triton model TRITON under these names instead of its own "
                        "(repeatable)")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="Jinja chat template used instead of the tokenizer's")
    p.add_argument("--tokenizer", default=d.tokenizer,
                   help="tokenizer folder used instead of each model's own (vllm_model)")
    p.add_argument("--tool-call-parser", default=d.tool_call_parser, choices=tool_parser_names(),
                   help="how to read tool calls from generated text (default: %(default)s)")
    p.add_argument("--reasoning-parser", default=d.reasoning_parser,
                   choices=reasoning_parser_names(),
                   help="split the model's reasoning from its answer (message.reasoning; "
                        "reasoning items in /v1/responses)")
    p.add_argument("--generation-config", default=d.generation_config, metavar="auto|vllm|DIR",
                   help="sampling defaults: each model's generation_config.json (auto), "
                        "none (vllm), or DIR's (default: %(default)s)")
    p.add_argument("--compact-json", action="store_true", default=d.compact_json,
                   help="structured JSON without free whitespace unless a request sets "
                        "structured_outputs.disable_any_whitespace: false")
    p.add_argument("--cors-origins", default=",".join(d.cors_origins),
                   help="comma-separated allowed origins for CORS ('*' for any); none by default")
    p.add_argument("--max-request-bytes", type=int, default=d.max_request_bytes,
                   help="largest request body accepted; larger gets 413 (default: %(default)s)")
    p.add_argument("--log-format", choices=["text", "json"], default=d.log_format,
                   help="access log lines as text or one JSON object each")
    p.add_argument("--log-level", default="info", help="log level (default: %(default)s)")
    p.add_argument("--shutdown-timeout", type=float,
                   default=float(os.environ.get(SHUTDOWN_TIMEOUT_ENV) or d.shutdown_timeout),
                   help="seconds that requests in flight get to finish on SIGTERM; those "
                        f"still running then end with an error (or set ${SHUTDOWN_TIMEOUT_ENV}; "
                        "default: %(default)s)")
    p.add_argument("--timeout-keep-alive", type=positive_seconds,
                   default=os.environ.get(KEEP_ALIVE_ENV) or d.keep_alive_timeout,
                   metavar="SECONDS",
                   help="how long an idle keep-alive connection stays open; keep it above "
                        "your clients' and load balancer's idle timeouts (or set "
                        f"${KEEP_ALIVE_ENV}; default: %(default)s)")
    p.add_argument("--model-health-interval", type=seconds_or_off,
                   default=d.model_health_interval, metavar="SECONDS",
                   help="how often each served model is asked whether its engine is alive; "
                        "a dead one makes /health/ready 503 and its requests are refused "
                        "with 503 at once (0: never ask; default: %(default)s)")
    p.add_argument("--responses-store-size", type=int, default=d.responses_store_size, metavar="N",
                   help="responses kept in memory for GET /v1/responses/{id} and "
                        "previous_response_id, least recently used dropped first; 0 keeps none "
                        "(default: %(default)s)")
    return p


def config_from_args(args: argparse.Namespace) -> FrontendConfig:
    template = None
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as f:
            template = f.read()
    return FrontendConfig(
        triton_url=args.triton_url,
        triton_metrics_url=args.triton_metrics_url or None,
        host=args.host, port=args.port,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
        served_model_names=parse_served_names(args.served_model_name),
        chat_template=template, tokenizer=args.tokenizer,
        cors_origins=[o.strip() for o in args.cors_origins.split(",") if o.strip()],
        max_request_bytes=args.max_request_bytes, log_format=args.log_format,
        tool_call_parser=args.tool_call_parser, reasoning_parser=args.reasoning_parser,
        generation_config=args.generation_config, compact_json=args.compact_json,
        shutdown_timeout=args.shutdown_timeout,
        keep_alive_timeout=args.timeout_keep_alive,
        model_health_interval=args.model_health_interval,
        responses_store_size=args.responses_store_size)


class _JsonFormatter(logging.Formatter):
    def format(self, record):
        msg = record.getMessage()
        if msg.startswith("{"):
            return msg
        return json.dumps({"level": record.levelname.lower(), "logger": record.name, "message": msg})


def _setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json"
                         else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except (OSError, argparse.ArgumentTypeError) as err:
        parser.error(str(err))
    _setup_logging(config.log_format, args.log_level)

    import uvicorn

    from .app import build_app
    from .triton.select import ClientSelectionError

    try:
        app = build_app(config)
    except (ClientSelectionError, ValueError) as err:
        parser.error(str(err))
    from .shutdown import DrainingServer

    uv_config = uvicorn.Config(app, host=config.host, port=config.port, access_log=False,
                               log_config=None, log_level=args.log_level,
                               # What is left once the drain is over are the cut requests'
                               # error answers: a few seconds are plenty.
                               timeout_graceful_shutdown=5,
                               timeout_keep_alive=config.keep_alive_timeout)
    server = DrainingServer(uv_config, app.state.drain, config.shutdown_timeout)
    server.run()
    status = server.exit_status
    if status:
        logging.getLogger("triton_openai.shutdown").error(
            "stopped after cutting %d request(s): %s", len(app.state.drain.cut_requests),
            "; ".join(app.state.drain.cut_requests))
    return status


if __name__ == "__main__":
    sys.exit(main())

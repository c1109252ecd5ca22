"""`triton-openai`: parse flags, build the app, run it under uvicorn."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import FrontendConfig
from .reasoning import parser_names as reasoning_parser_names
from .tool_parsers import parser_names as tool_parser_names
from .triton import capi
from .triton.credentials import MODEL_CONTROL_KEY_ENV

API_KEY_ENV = "TRITON_OPENAI_API_KEY"
SHUTDOWN_TIMEOUT_ENV = "TRITON_OPENAI_SHUTDOWN_TIMEOUT"
KEEP_ALIVE_ENV = "TRITON_OPENAI_TIMEOUT_KEEP_ALIVE"
# Exit status when the Triton in this process could not start (a model failed to load),
# as tritonserver's own.
EXIT_TRITON_FAILED = 1
# Exit status when a model of the Triton in this process died: the image's model watch's.
EXIT_MODEL_DEAD = 4


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


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a whole number above 0, not {value!r}")
    return number


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
    p.add_argument("--triton-url", default=None,
                   help="Triton's KServe gRPC endpoint HOST:PORT (or grpc://HOST:PORT), or its "
                        f"HTTP endpoint http://HOST:PORT (default: {d.triton_url})")
    p.add_argument("--triton-metrics-url", default=None,
                   help="Triton's Prometheus page, appended to /metrics; '' to leave it out "
                        f"(default: {d.triton_metrics_url}; in process, Triton's own series)")
    _in_process_flags(p)
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
    p.add_argument("--max-batch-inputs", type=positive_int, default=d.max_batch_inputs,
                   metavar="N",
                   help="most prompts x n in one /v1/completions request and inputs in one "
                        "/v1/embeddings request; more gets 400 (default: %(default)s)")
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
    p.add_argument("--no-stream-feeds", dest="stream_feeds", action="store_false",
                   help="send each stream's text on its own Triton request, a response per "
                        "step, instead of on its model's feed, where the vLLM backend encodes "
                        "the events of every stream at once (a response per engine step)")
    p.add_argument("--responses-store-size", type=int, default=d.responses_store_size, metavar="N",
                   help="responses kept in memory for GET /v1/responses/{id} and "
                        "previous_response_id, least recently used dropped first; 0 keeps none "
                        "(default: %(default)s)")
    p.add_argument("--max-background-responses", type=positive_int,
                   default=d.max_background_responses, metavar="N",
                   help="`background: true` responses running at once; more get 429 until "
                        "one ends (default: %(default)s)")
    return p


def _in_process_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "Triton in this process",
        "With --model-repository, Triton runs inside the frontend (libtritonserver, its C "
        "API) instead of in a tritonserver that --triton-url reaches: one process and one "
        "socket less per streamed token.  Triton's own HTTP/gRPC endpoints are not served "
        "then; run tritonserver for KServe clients.")
    g.add_argument("--model-repository", default=None, metavar="DIR",
                   help="serve the models of DIR from a Triton in this process")
    g.add_argument("--triton-library", default=None, metavar="PATH",
                   help=f"libtritonserver.so (default: ${capi.LIBRARY_ENV}, or "
                        f"{capi.DEFAULT_HOME}/lib/libtritonserver.so)")
    g.add_argument("--backend-directory", default=None, metavar="DIR",
                   help="Triton's backends (default: backends/ beside the library's lib/)")
    g.add_argument("--model-control-mode", choices=["none", "poll", "explicit"], default="none",
                   help="as tritonserver's (default: %(default)s)")
    g.add_argument("--load-model", action="append", default=[], metavar="NAME",
                   help="with --model-control-mode=explicit: a model to load at start")
    g.add_argument("--backend-config", action="append", default=[],
                   metavar="BACKEND,SETTING=VALUE", help="as tritonserver's, repeatable")
    g.add_argument("--triton-log-verbose", type=int, default=0, metavar="LEVEL",
                   help="Triton's verbose log level (default: %(default)s)")
    g.add_argument("--triton-log-info", action="store_true",
                   help="Triton's info log (tritonserver's --log-info)")


@dataclass(frozen=True)
class Option:
    """One flag of `triton-openai`, for a command that takes it and hands it on to the
    frontend (the vLLM backend's `serve` offers the frontend's flags beside vLLM's): what
    argparse's public add_argument needs to make a flag that reads and checks a value as
    this command's own parser does."""
    flags: tuple[str, ...]  # its option strings: ("--api-key",)
    dest: str  # the attribute parse_args() sets
    takes_value: bool  # `--flag VALUE`; False: a switch, which stores `const`
    nargs: int | str | None  # argparse's: None is one value, 0 a switch
    repeatable: bool  # each use adds its value to a list (--served-model-name)
    const: Any  # what a switch stores: True, or False for a --no- form
    default: Any
    type: Callable[[str], Any] | None  # reads and checks a value (positive_int, ...)
    choices: tuple[Any, ...] | None
    metavar: str | None
    help: str | None


def option_table() -> tuple[Option, ...]:
    """Every flag of `triton-openai` but --help, in the order its --help lists them.

    Read from build_parser()'s own arguments, so the table cannot drift from the
    command.  argparse lists a parser's arguments nowhere public: its `_actions` are read
    here, by the module that made them, so that no other command has to."""
    table = []
    for action in build_parser()._actions:
        if not action.option_strings or "--help" in action.option_strings:
            continue  # argparse's own --help (and positionals, which this parser has none of)
        table.append(Option(
            flags=tuple(action.option_strings), dest=action.dest,
            takes_value=action.nargs != 0, nargs=action.nargs,
            repeatable=isinstance(action, argparse._AppendAction), const=action.const,
            default=action.default, type=action.type,
            choices=None if action.choices is None else tuple(action.choices),
            metavar=action.metavar, help=action.help))
    return tuple(table)


def in_process_settings(args: argparse.Namespace, exit_timeout_s: float):
    """The in-process server's settings, or None when the frontend reaches a tritonserver."""
    if not args.model_repository:
        return None
    if args.triton_url:
        raise argparse.ArgumentTypeError("--model-repository runs Triton in this process; "
                                         "--triton-url reaches another one: give one of them")
    from .triton.inprocess_client import ServerSettings, parse_backend_config

    library = capi.library_path(args.triton_library)
    backends = args.backend_directory or str(Path(library).resolve().parent.parent / "backends")
    if not Path(args.model_repository).is_dir():
        raise argparse.ArgumentTypeError(f"--model-repository {args.model_repository}: "
                                         f"no such directory")
    try:
        backend_config = tuple(parse_backend_config(v) for v in args.backend_config)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--backend-config {err}") from None
    return ServerSettings(
        model_repository=args.model_repository, backend_directory=backends,
        repoagent_directory=str(Path(backends).parent / "repoagents"),
        model_control_mode=args.model_control_mode, load_models=tuple(args.load_model),
        exit_timeout_s=max(1, int(exit_timeout_s)), log_info=args.triton_log_info,
        log_verbose=args.triton_log_verbose, backend_config=backend_config, library=library)


def config_from_args(args: argparse.Namespace) -> FrontendConfig:
    d = FrontendConfig()
    in_process = in_process_settings(args, args.shutdown_timeout)
    metrics_url = args.triton_metrics_url
    if metrics_url is None:
        metrics_url = None if in_process else d.triton_metrics_url
    template = None
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as f:
            template = f.read()
    return FrontendConfig(
        triton_url=None if in_process else args.triton_url or d.triton_url,
        triton_metrics_url=metrics_url or None,
        in_process=in_process,
        host=args.host, port=args.port,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
        served_model_names=parse_served_names(args.served_model_name),
        chat_template=template, tokenizer=args.tokenizer,
        cors_origins=[o.strip() for o in args.cors_origins.split(",") if o.strip()],
        max_request_bytes=args.max_request_bytes, max_batch_inputs=args.max_batch_inputs,
        log_format=args.log_format,
        tool_call_parser=args.tool_call_parser, reasoning_parser=args.reasoning_parser,
        generation_config=args.generation_config, compact_json=args.compact_json,
        shutdown_timeout=args.shutdown_timeout,
        keep_alive_timeout=args.timeout_keep_alive,
        model_health_interval=args.model_health_interval,
        responses_store_size=args.responses_store_size,
        max_background_responses=args.max_background_responses,
        stream_feeds=args.stream_feeds)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: the access log's own (already one object, its client
    text escaped), the others' wrapped, with the traceback of a failure that has one
    (an unexpected error's details are only in the log)."""

    def format(self, record):
        msg = record.getMessage()
        if record.name == "triton_openai.access" and msg.startswith("{"):
            return msg
        line = {"level": record.levelname.lower(), "logger": record.name, "message": msg}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


def _setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json"
                         else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _with_library_folder(library: str) -> None:
    """Run this command again with the Triton library's folder on LD_LIBRARY_PATH, once.

    tritonserver finds the libraries beside it (and its backends find theirs) through
    its RPATH; a Python process has no such path, and the dynamic loader reads
    LD_LIBRARY_PATH only when a process starts.  NGC's images set it already.
    """
    folder = str(Path(library).resolve().parent)
    paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if folder in paths:
        return
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([*paths, folder])
    os.execv(sys.executable, sys.orig_argv)


def forget_keys(environ=os.environ) -> None:
    """Take the keys out of this process's environment once they are read (the app holds
    them): the processes it starts (Triton's model stubs and vLLM's engine, with Triton in
    process) never need them, and torch's compile cache writes its processes' environment
    into files of its own."""
    for name in (API_KEY_ENV, MODEL_CONTROL_KEY_ENV):
        environ.pop(name, None)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except (OSError, argparse.ArgumentTypeError, capi.CapiError) as err:
        parser.error(str(err))
    if config.in_process is not None and argv is None:
        _with_library_folder(config.in_process.library)
    _setup_logging(config.log_format, args.log_level)

    import uvicorn

    from .app import build_app
    from .triton.select import ClientSelectionError

    try:
        app = build_app(config)
    except (ClientSelectionError, ValueError) as err:
        parser.error(str(err))
    forget_keys()
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
    start_error = getattr(app.state.triton, "start_error", None)
    if start_error:
        logging.getLogger("triton_openai.triton").error("Triton did not start: %s", start_error)
        return EXIT_TRITON_FAILED
    if app.state.dead_model:
        logging.getLogger("triton_openai.triton").error(
            "stopped: model %s (Triton in this process cannot load it again)",
            app.state.dead_model)
        return EXIT_MODEL_DEAD
    if status:
        logging.getLogger("triton_openai.shutdown").error(
            "stopped after cutting %d request(s): %s", len(app.state.drain.cut_requests),
            "; ".join(app.state.drain.cut_requests))
    return status


if __name__ == "__main__":
    sys.exit(main())

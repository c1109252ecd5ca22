"""`serve`: a model folder and `vllm serve`'s flags in, a Triton model repository out.

    python -m triton_vllm_backend.serve OUTPUT_DIR MODEL [VLLM AND FRONTEND FLAGS]
    python -m triton_vllm_backend.serve OUTPUT_DIR --models FILE.yaml

writes `OUTPUT_DIR/model_repository/` (one model per MODEL, named by
`--served-model-name` or the folder) and `OUTPUT_DIR/frontend.args`, the OpenAI
frontend's flags separated by NUL bytes.  The image's `serve` command runs it, then
starts tritonserver on that repository and the frontend with those flags.

`--api-key` is the one flag that is not in frontend.args: a key on a command line is
in every `ps`, and frontend.args is readable by all.  It goes to `OUTPUT_DIR/api-key`,
made readable by its owner alone, and the image's entrypoint hands it to the frontend
in the environment (TRITON_OPENAI_API_KEY).

`--help` prints the flags and exits with EXIT_HELP_ONLY, not 0: the image's entrypoint
then starts nothing (a 0 would start the servers on whatever an earlier run made).

The engine flags are parsed by vLLM's own parser (`AsyncEngineArgs.add_cli_args`), so a
flag vLLM adds works here unchanged and an unknown or invalid one is refused with vLLM's
own message before anything starts.  model.json keeps the flags that differ from vLLM's
defaults.  The frontend's flags (FRONTEND_FLAGS, as the frontend's `option_table()`
describes them, so each value is checked as the frontend's own parser checks it) go to
the frontend; one that is also an engine argument (`--reasoning-parser`,
`--generation-config`) goes to both.

A models file lists several models, each a path and its flags: a string, a list, or a
mapping as vLLM's own `--config` file has it (`true` is the bare flag, `false` its
`--no-` form, or nothing where the flag has none):

    models:
      - path: /models/my-llm
        args: --max-model-len 4096
      - path: /models/minilm
        args: [--runner, pooling]
      - path: /models/other
        args: {max-model-len: 2048, enforce-eager: true, enable-prefix-caching: false}
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from .repository import ModelSpec, RepositoryError, triton_name, write_repository

__all__ = ["ServeError", "Served", "ServeParser", "build_parser", "parse_model",
           "parse_models_file", "main", "FRONTEND_FLAGS", "REPOSITORY", "FRONTEND_ARGS",
           "API_KEY_FILE", "EXIT_HELP_ONLY"]

REPOSITORY = "model_repository"
FRONTEND_ARGS = "frontend.args"
# --api-key's value, readable by its owner alone (never in frontend.args or an argv).
API_KEY_FILE = "api-key"
API_KEY_FLAG = "--api-key"
# The exit status after --help: the flags were printed and there is nothing to serve.
EXIT_HELP_ONLY = 10
# The frontend's flags a user may give `serve` (as the frontend's option_table() describes
# them); the image sets the others (--triton-url, --host, --port) itself.
FRONTEND_FLAGS = ("--chat-template", "--tool-call-parser", "--reasoning-parser", "--api-key",
                  "--generation-config", "--compact-json", "--cors-origins",
                  "--max-request-bytes", "--max-batch-inputs", "--max-background-responses",
                  "--timeout-keep-alive", "--responses-store-size", "--log-format")
# Files a model folder holds: Hugging Face's config, or Mistral's native params.
_MODEL_FILES = ("config.json", "params.json")
# `--task` is gone from newer vLLM (0.11 still has it); where the parser lacks it, the
# embedding tasks become what replaced them.
_TASK_RUNNER = {"generate": "generate", "embed": "pooling", "embedding": "pooling"}
# Arguments of the parser that are not engine arguments for model.json.
_NOT_ENGINE = {"model_tag", "task", "served_model_name"}


class ServeError(ValueError):
    """The command line or models file cannot make a repository; the message says why."""


@dataclass(frozen=True)
class Served:
    """What serve makes: the models, the frontend's flags, and its API key (kept apart)."""
    specs: list[ModelSpec]
    frontend: list[str]
    api_key: str | None = None


@dataclass(frozen=True)
class _Negated:
    """A boolean flag a models file sets to false: its --no- form where the parser has
    one, else nothing (as vLLM's --config file reads `flag: false`).  Only the parser,
    which imports vLLM, knows which it is."""
    flag: str


class _Options:
    """The option strings serve's parser takes, each with the dest it sets: vLLM's, read
    once from the arguments vLLM made, and each that serve adds (through add())."""

    def __init__(self, engine_arguments: list[argparse.Action]):
        self._dests = {flag: action.dest for action in engine_arguments
                       for flag in action.option_strings}

    def __contains__(self, flag: str) -> bool:
        return flag in self._dests

    def dest(self, flag: str) -> str:
        return self._dests[flag]

    def add(self, container, *flags: str, **kwargs) -> argparse.Action:
        """container.add_argument(*flags, **kwargs), its option strings recorded."""
        action = container.add_argument(*flags, **kwargs)
        self._dests.update(dict.fromkeys(action.option_strings, action.dest))
        return action


@dataclass(frozen=True)
class ServeParser:
    """serve's parser, and what serve knows of its flags."""
    parser: argparse.ArgumentParser
    routed: dict[str, str]  # each frontend flag: the dest parse_args() sets for it
    options: _Options


def _engine_arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments of the parser that vLLM's add_cli_args filled.  argparse lists a
    parser's arguments nowhere public, and vLLM, not serve, made these: this is the one
    place serve reads argparse's own attribute for them."""
    return list(parser._actions)


def _add_frontend_option(group, option, options: _Options) -> argparse.Action:
    """One of the frontend's flags, as its option_table() describes it: it reads and
    checks a value as the frontend's own parser does."""
    common = {"dest": option.dest, "default": option.default, "help": option.help}
    if not option.takes_value:
        return options.add(group, *option.flags, action="store_const", const=option.const,
                           **common)
    return options.add(group, *option.flags, action="append" if option.repeatable else "store",
                       nargs=option.nargs, type=option.type, choices=option.choices,
                       metavar=option.metavar, **common)


def _add_frontend_flags(parser: argparse.ArgumentParser, options: _Options) -> dict[str, str]:
    """The frontend's flags, as it describes them; {flag: dest} of each, the engine
    argument's dest for a flag that vLLM takes too."""
    try:
        from triton_openai.cli import option_table
    except ImportError:
        return {}  # no frontend here (a Triton-only image): its flags are unknown ones
    described = {flag: option for option in option_table() for flag in option.flags}
    group = parser.add_argument_group("the OpenAI frontend's flags")
    routed = {}
    for flag in FRONTEND_FLAGS:
        if flag not in options:  # else an engine argument too, parsed as vLLM's
            _add_frontend_option(group, described[flag], options)
        routed[flag] = options.dest(flag)
    return routed


def flexible_parser(**kwargs):
    """A new parser of vLLM's own kind (FlexibleArgumentParser), wherever this vLLM keeps it."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        try:  # vLLM 0.11, whose vllm.utils is one module
            from vllm.utils import FlexibleArgumentParser
        except ImportError:
            raise ImportError("vLLM has no FlexibleArgumentParser where serve looks") from None
    return FlexibleArgumentParser(**kwargs)


def build_parser() -> ServeParser:
    """vLLM's engine-argument parser with a positional model and the frontend's flags."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    parser = flexible_parser(
        prog="serve", usage="serve MODEL [vLLM engine flags] [frontend flags] | "
                            "serve --models FILE.yaml")
    parser.add_argument("model_tag", metavar="MODEL",
                        help="the model's folder (or a Hugging Face hub id)")
    AsyncEngineArgs.add_cli_args(parser)
    engine_arguments = _engine_arguments(parser)
    options = _Options(engine_arguments)
    _add_negations(parser, engine_arguments, options)
    if "--task" not in options:
        options.add(parser, "--task", choices=sorted(_TASK_RUNNER),
                    help="older vLLM's spelling of --runner (embed: --runner pooling)")
    return ServeParser(parser, _add_frontend_flags(parser, options), options)


def _add_negations(parser: argparse.ArgumentParser, engine_arguments: list[argparse.Action],
                   options: _Options) -> None:
    """vLLM gives most boolean flags a --no- form; its store_true ones (switches that store
    True) get one here, so that any boolean setting can be written as a flag (the Helm
    chart writes its models' that way).  An explicit --no-disable-log-stats is kept in
    model.json: it turns vLLM's statistics on for a pooling model too."""
    for action in engine_arguments:
        if not (action.nargs == 0 and action.const is True):
            continue
        flag = next(f for f in action.option_strings if f.startswith("--"))
        negation = f"--no-{flag[2:]}"
        if negation not in options:
            options.add(parser, negation, dest=action.dest, action="store_false",
                        default=action.default, help=f"undoes {flag}")
    parser.set_defaults(disable_log_stats=None)


def check_model_path(model: str) -> None:
    """A local path must be a model folder; anything else that does not exist here is
    left to vLLM as a hub id ("org/name"), which offline must be in the Hugging Face cache."""
    path = Path(model).expanduser()
    if not path.exists():
        if model.startswith(("/", "./", "../", "~")) or model.count("/") != 1:
            raise ServeError(f"{model}: no such model folder")
        _check_hub_id_offline(model)
        return
    if not path.is_dir():
        raise ServeError(f"{model}: not a model folder (a file; serve takes the folder "
                         f"holding config.json)")
    if not any((path / name).is_file() for name in _MODEL_FILES):
        raise ServeError(f"{model}: not a model folder (no {' or '.join(_MODEL_FILES)} in it)")


def _check_hub_id_offline(model: str) -> None:
    """With HF_HUB_OFFLINE set (the image sets it) vLLM loads a hub id only from the
    Hugging Face cache: a model the cache lacks is refused now, not at its load."""
    try:
        from huggingface_hub import constants, try_to_load_from_cache
    except ImportError:
        return  # no hub client here: vLLM's load says what is wrong
    if not constants.HF_HUB_OFFLINE:
        return
    cache = constants.HF_HUB_CACHE
    if any(isinstance(try_to_load_from_cache(model, name, cache_dir=cache), str)
           for name in _MODEL_FILES):
        return
    raise ServeError(f"{model}: no such model folder, and HF_HUB_OFFLINE is set but the "
                     f"Hugging Face cache ({cache}) does not hold this hub id: download it "
                     f"there first, give its folder, or set HF_HUB_OFFLINE=0 for vLLM to "
                     f"download it")


def _jsonable(flag: str, value):
    """vLLM parses some flags into config objects; model.json holds the fields the user
    set (those that differ from the config's defaults), which vLLM turns back into one."""
    import dataclasses
    try:
        json.dumps(value)
        return value
    except TypeError:
        pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            default, again = type(value)(), type(value)()
        except Exception:  # a config without defaults: keep every field
            default = again = None

        def set_by_user(name: str) -> bool:
            if default is None:
                return True
            # A field whose default differs between two fresh configs (an id) is vLLM's.
            fresh = getattr(default, name)
            return fresh == getattr(again, name) and getattr(value, name) != fresh
        return {f.name: _jsonable(f"{flag}.{f.name}", getattr(value, f.name))
                for f in dataclasses.fields(value) if set_by_user(f.name)}
    raise ServeError(f"--{flag.replace('_', '-')}: vLLM parsed it into {type(value).__name__}, "
                     f"which model.json cannot hold")


def _frontend_args(routed: dict[str, str], args, defaults) -> list[str]:
    out: list[str] = []
    for flag, dest in routed.items():
        value = getattr(args, dest)
        if value == getattr(defaults, dest) or value is None:
            continue
        out += [flag] if value is True else [flag, str(value)]
    template = getattr(args, "chat_template", None)
    if template and not Path(template).is_file():
        # The frontend reads it only once the server is up: refuse it now.
        raise ServeError(f"--chat-template {template}: no such file")
    return out


def parse_model(argv: list[str], parser: ServeParser | None = None
                ) -> tuple[ModelSpec, list[str]]:
    """One model's command line: its spec, and the frontend's flags it gives."""
    built = parser or build_parser()
    routed = built.routed
    args = built.parser.parse_args(argv)
    defaults = built.parser.parse_args([args.model_tag])
    check_model_path(args.model_tag)
    if args.model != defaults.model and args.model != args.model_tag:
        raise ServeError(f"MODEL is {args.model_tag} but --model says {args.model}: give one")
    engine: dict = {"model": args.model_tag}
    frontend_only = set(routed.values()) - _engine_fields()
    for dest, value in vars(args).items():
        if dest in _NOT_ENGINE or dest in frontend_only or dest == "model":
            continue
        if value != getattr(defaults, dest):
            engine[dest] = _jsonable(dest, value)
    if getattr(args, "task", None):
        engine.setdefault("runner", _TASK_RUNNER[args.task])
    served = list(args.served_model_name or [])
    try:
        name = served[0] if served and "/" not in served[0] else triton_name(args.model_tag)
        spec = ModelSpec(name, _with_statistics(engine))
    except RepositoryError as e:
        raise ServeError(str(e)) from None
    frontend = _frontend_args(routed, args, defaults)
    publics = [n for n in served if n != name]
    if publics:
        frontend += ["--served-model-name", f"{name}={','.join(publics)}"]
    return spec, frontend


def _engine_fields() -> set[str]:
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs
    return {f.name for f in dataclasses.fields(AsyncEngineArgs)}


def _with_statistics(engine: dict) -> dict:
    """Generating models publish vLLM's statistics on Triton's metrics endpoint (as the
    sample model does) unless --disable-log-stats is given; pooling models keep vLLM's
    default."""
    from .stub.engine_config import runner_of
    from .stub.wire import GENERATE
    if runner_of(engine) == GENERATE and "disable_log_stats" not in engine:
        engine["disable_log_stats"] = False
    return engine


def parse_models_file(path: Path | str) -> list[list]:
    """A models file's command lines, one per model: [path, *args] (a flag that the file
    sets to false is a _Negated, which parse() resolves)."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ServeError(f"--models {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ServeError(f"--models {path}: not valid YAML: {e}") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list) or not models:
        raise ServeError(f"--models {path}: needs `models:`, a list of {{path, args}}")
    out = []
    for i, entry in enumerate(models, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) \
                or set(entry) - {"path", "args"}:
            raise ServeError(f"--models {path}: model {i} must be {{path: FOLDER, args: FLAGS}}")
        try:
            out.append([entry["path"], *_model_args(entry.get("args"))])
        except ServeError as e:
            raise ServeError(f"--models {path}: model {i}'s args {e}") from None
    return out


def _model_args(args) -> list:
    """A models file's `args`: a string (split as a shell splits it), a list of flags and
    values, or a mapping of flag to value; None (`args:` left empty) is no flags."""
    if args is None:
        return []
    if isinstance(args, str):
        return shlex.split(args)
    if isinstance(args, list):
        return _list_args(args)
    if isinstance(args, dict):
        return _mapping_args(args)
    raise ServeError(f"must be a string, a list or a mapping, not {_yaml_kind(args)}")


def _yaml_kind(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return {int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _list_args(items: list) -> list:
    """[--flag, value, ...]: a true or false after a flag is that flag's switch (true the
    bare flag, false its --no- form), not the word "True"."""
    out: list = []
    for item in items:
        if isinstance(item, bool):
            if not out or not isinstance(out[-1], str) or not out[-1].startswith("--"):
                raise ServeError(f"has {str(item).lower()} where no flag comes before it "
                                 f"(a switch is the flag alone: [--enforce-eager])")
            if not item:
                out[-1] = _Negated(out[-1])
        elif isinstance(item, (str, int, float)):
            out.append(str(item))
        else:
            raise ServeError(f"must hold flags and values, not {_yaml_kind(item)}")
    return out


def _mapping_args(flags: dict) -> list:
    """{flag: value}, as vLLM's --config file: a list is the flag and each item, a mapping
    its JSON, true the bare flag, false its --no- form."""
    out: list = []
    for key, value in flags.items():
        flag = f"--{str(key).removeprefix('--')}"
        if isinstance(value, bool):
            out.append(flag if value else _Negated(flag))
        elif isinstance(value, list):
            out += [flag, *map(str, value)] if value else []
        elif isinstance(value, dict):
            out += [flag, json.dumps(value)]
        elif isinstance(value, (str, int, float)):
            out += [flag, str(value)]
        else:
            raise ServeError(f"give {key} a value")
    return out


def _resolve(line: list, options: _Options) -> list[str]:
    """A models file's line with each false switch made its --no- form, or left out."""
    out = []
    for item in line:
        if isinstance(item, _Negated):
            negation = f"--no-{item.flag.removeprefix('--')}"
            if negation in options:
                out.append(negation)
        else:
            out.append(item)
    return out


def _take_api_key(frontend: list[str]) -> tuple[list[str], str | None]:
    """The frontend's flags without --api-key, and its value (_frontend_args writes each
    flag once, followed by its value)."""
    if API_KEY_FLAG not in frontend:
        return frontend, None
    at = frontend.index(API_KEY_FLAG)
    return frontend[:at] + frontend[at + 2:], frontend[at + 1]


def _merge_frontend(per_model: list[list[str]]) -> list[str]:
    """The frontend is one for all models: each of its flags may have one value."""
    merged: list[str] = []
    seen: dict[str, list[str]] = {}
    for args in per_model:
        i = 0
        while i < len(args):
            flag = args[i]
            takes = i + 1 < len(args) and not args[i + 1].startswith("--")
            item = args[i:i + 2] if takes else args[i:i + 1]
            i += len(item)
            if flag == "--served-model-name":
                merged += item
            elif flag in seen and seen[flag] != item:
                raise ServeError(f"{flag} is given twice with different values; the frontend "
                                 f"serves all models with one")
            elif flag not in seen:
                seen[flag] = item
                merged += item
    return merged


def parse(argv: list[str]) -> Served:
    if argv[:1] == ["--models"] or (argv and argv[0].startswith("--models=")):
        rest = argv[1:] if argv[0] == "--models" else [argv[0].split("=", 1)[1], *argv[1:]]
        if len(rest) != 1:
            raise ServeError("--models takes one file and no other flags (each model's "
                             "flags go in the file)")
        lines = parse_models_file(rest[0])
    else:
        lines = [argv]
    for line in lines:  # before vLLM's import, which takes seconds
        if line and isinstance(line[0], str) and not line[0].startswith("-"):
            check_model_path(line[0])
    try:
        parser = build_parser()
    except ImportError as e:
        raise ServeError(f"serve needs vLLM's argument parser, which does not import "
                         f"here: {e}") from None
    specs, frontend, keys = [], [], set()
    for line in lines:
        if len(lines) > 1:
            print(f"serve: model {line[0]}", file=sys.stderr)
        spec, args = parse_model(_resolve(line, parser.options), parser)
        args, key = _take_api_key(args)
        specs.append(spec)
        frontend.append(args)
        keys |= {key} - {None}
    if len(keys) > 1:
        raise ServeError(f"{API_KEY_FLAG} is given twice with different values; the "
                         f"frontend serves all models with one")
    return Served(specs, _merge_frontend(frontend), keys.pop() if keys else None)


def write(output: Path | str, served: Served) -> Path:
    """OUTPUT/model_repository (replaced whole), OUTPUT/frontend.args and, with an API
    key, OUTPUT/api-key (an earlier run's is removed when this one has none)."""
    output = Path(output)
    repository = output / REPOSITORY
    if repository.exists():
        shutil.rmtree(repository)
    write_repository(served.specs, repository)
    (output / FRONTEND_ARGS).write_bytes(b"".join(a.encode() + b"\0" for a in served.frontend))
    key_file = output / API_KEY_FILE
    key_file.unlink(missing_ok=True)
    if served.api_key is not None:
        _write_private(key_file, served.api_key)
    return repository


def _write_private(path: Path, text: str) -> None:
    """A new file that only its owner can read.  Made with that mode (O_EXCL: never an
    existing file or a link someone left there), not chmod-ed after it was written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("-"):
        print("usage: python -m triton_vllm_backend.serve OUTPUT_DIR MODEL [FLAGS] | "
              "OUTPUT_DIR --models FILE.yaml", file=sys.stderr)
        return 2
    output, rest = argv[0], argv[1:]
    if not rest:
        print("serve: give a model folder (serve MODEL [vLLM flags]) or --models FILE.yaml",
              file=sys.stderr)
        return 2
    try:
        served = parse(rest)
        repository = write(output, served)
    except SystemExit as e:
        if e.code not in (0, None):  # the parser's error, said already
            raise
        return EXIT_HELP_ONLY  # --help: said, and nothing to serve
    except (ServeError, RepositoryError) as e:
        print(f"serve: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"serve: error: cannot write {output}: {e.strerror}", file=sys.stderr)
        return 1
    for spec in served.specs:
        print(f"serve: {repository}/{spec.name}: {json.dumps(spec.engine_args)}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

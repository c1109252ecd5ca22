"""Read and check a model's `model.json`: the vLLM engine arguments.

Every check fails the model load with one `ConfigError` that names the offending key or
setting, so a typo in model.json is a one-line message in the server log rather than a
traceback from deep inside vLLM (and the server keeps serving its other models).
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

from .wire import (
    GENERATE,
    MAX_MODEL_LEN_PARAMETER,
    MODEL_PARAMETER,
    POOLING,
    RUNNER_PARAMETER,
)

MODEL_JSON = "model.json"
MULTI_LORA_JSON = "multi_lora.json"

# Keys whose value is a local path that must exist when it looks like one (a value
# such as "org/name" is a hub id and is left to vLLM).
_PATH_KEYS = ("model", "tokenizer")


class ConfigError(ValueError):
    """model.json (or the model config around it) cannot make an engine."""


def read_json_object(path: Path, holds: str) -> dict:
    """A model file's JSON object; ConfigError when it is not JSON, or not an object (then
    the message says what it must `holds`)."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must {holds}")
    return data


def load_model_json(version_dir: Path | str) -> dict:
    path = Path(version_dir) / MODEL_JSON
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (the vLLM backend reads its engine "
                          f"arguments from {MODEL_JSON} in the model's version folder)")
    data = read_json_object(path, "hold a JSON object of engine arguments")
    if "model" not in data:
        raise ConfigError(f"{path}: the key 'model' (a model folder or hub id) is required")
    return data


def _looks_local(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~"))


def resolve_paths(engine_args: dict, version_dir: Path | str) -> dict:
    """Make relative model paths relative to the version folder, and check they exist."""
    out = dict(engine_args)
    for key in _PATH_KEYS:
        value = out.get(key)
        if not isinstance(value, str):
            continue
        candidate = Path(version_dir) / value
        if value.startswith(("./", "../")):
            out[key] = str(candidate.resolve())
        elif _looks_local(value):
            out[key] = os.path.expanduser(value)
        if _looks_local(value) and not Path(out[key]).exists():
            raise ConfigError(f"{MODEL_JSON}: '{key}' names {out[key]}, which does not exist")
    return out


def check_keys(engine_args: dict, known: set[str]) -> None:
    """Every key must be an engine argument (`known` = AsyncEngineArgs field names)."""
    for key in engine_args:
        if key not in known:
            hint = difflib.get_close_matches(key, known, n=1)
            also = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ConfigError(f"{MODEL_JSON}: unknown engine argument '{key}'{also}")


def check_devices(engine_args: dict, instance_kind: str) -> None:
    """Triton's KIND_GPU instance pins one GPU per instance, which tensor or pipeline
    parallelism over several GPUs cannot live with: use KIND_MODEL for those."""
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        size = engine_args.get(key, 1)
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise ConfigError(f"{MODEL_JSON}: '{key}' must be an integer, got {size!r}") from None
        if size > 1 and instance_kind.upper() in ("GPU", "KIND_GPU"):
            raise ConfigError(
                f"{MODEL_JSON}: '{key}' is {size}, but the instance group kind is KIND_GPU, "
                f"which gives each instance one GPU; set `kind: KIND_MODEL` in config.pbtxt "
                f"so that vLLM places its {size} workers itself")


def instance_device_env(instance_kind: str, device_id: object, env: dict) -> dict[str, str]:
    """The environment that gives a KIND_GPU instance its own GPU, as Triton's own vLLM
    backend does: CUDA_VISIBLE_DEVICES set to the instance's device before vLLM starts.
    Triton numbers devices among those the server sees, so an inherited
    CUDA_VISIBLE_DEVICES list is indexed.  Other kinds: no change."""
    if instance_kind.upper() not in ("GPU", "KIND_GPU"):
        return {}
    try:
        index = int(device_id)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ConfigError(f"model_instance_device_id {device_id!r} is not a number") from None
    if index < 0:
        return {}
    visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        return {"CUDA_VISIBLE_DEVICES": str(index)}
    if index >= len(visible):
        raise ConfigError(f"the instance's GPU {index} is not among CUDA_VISIBLE_DEVICES="
                          f"{','.join(visible)}")
    return {"CUDA_VISIBLE_DEVICES": visible[index]}


# vLLM's worker_extension_cls that asks Linux for AMX in each CPU worker (amx_worker.py).
AMX_WORKER_EXTENSION = "triton_vllm_backend.stub.amx_worker.AmxPermission"


def with_amx_worker(engine_args: dict, on_cpu: bool) -> dict:
    """The engine arguments with the AMX worker hook, for an engine on the CPU whose
    model.json names no worker extension of its own (one it names is left alone)."""
    if not on_cpu or engine_args.get("worker_extension_cls"):
        return engine_args
    return {**engine_args, "worker_extension_cls": AMX_WORKER_EXTENSION}


def runner_of(engine_args: dict) -> str:
    """"pooling" for embedding models, "generate" otherwise."""
    runner = engine_args.get("runner", "auto")
    if runner == POOLING or engine_args.get("convert") in ("embed", "classify"):
        return POOLING
    return GENERATE


# Model config parameters that describe the model to clients (wire.py names them).
# Triton does not let auto-complete add parameters, so a config.pbtxt writes them itself;
# they must agree with model.json, or clients would be told about another model than the
# one served.
PUBLISHED = (MODEL_PARAMETER, RUNNER_PARAMETER, MAX_MODEL_LEN_PARAMETER)


def published_parameters(engine_args: dict) -> dict[str, str]:
    """The discovery parameters that describe `engine_args`."""
    out = {MODEL_PARAMETER: str(engine_args["model"]), RUNNER_PARAMETER: runner_of(engine_args)}
    if engine_args.get("max_model_len") is not None:
        out[MAX_MODEL_LEN_PARAMETER] = str(engine_args["max_model_len"])
    return out


def parameter(params: dict, name: str) -> str | None:
    """A config.pbtxt parameter's value, from Triton's model config ({"string_value": ...})
    or a plain mapping; None when it is not set."""
    value = params.get(name)
    if isinstance(value, dict):
        value = value.get("string_value")
    return None if value is None else str(value)


def check_published(params: dict, engine_args: dict) -> None:
    expected = published_parameters(engine_args)
    for key in PUBLISHED:
        value = parameter(params, key)
        if value is None:
            continue
        if key not in expected:
            raise ConfigError(f"config.pbtxt parameter '{key}' is '{value}', but model.json "
                              f"does not set it")
        if value != expected[key]:
            raise ConfigError(f"config.pbtxt parameter '{key}' is '{value}', but model.json "
                              f"says '{expected[key]}'")


def _setting(params: dict, name: str, env: dict | None) -> str | None:
    """A setting's value as a config.pbtxt parameter, else as an environment variable
    (the parameter wins); None when neither sets it."""
    value = parameter(params, name)
    if value is None:
        value = (os.environ if env is None else env).get(name)
    return value


def bool_setting(params: dict, name: str, env: dict | None = None,
                 default: bool = False) -> bool:
    """A switch given as a config.pbtxt parameter or as an environment variable."""
    value = _setting(params, name, env)
    if value is None:
        return default
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def whole_number_setting(params: dict, name: str, env: dict | None, default: int,
                         hint: str) -> int:
    """A whole number of at least 1 given as a config.pbtxt parameter or as an
    environment variable; `default` when neither sets it (or sets it empty), and a
    clear error, with `hint` on what it means, for any other value."""
    value = _setting(params, name, env)
    if value is None or str(value).strip() == "":
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{name} must be a whole number of at least 1 ({hint}), "
                          f"got {value!r}")
    return number

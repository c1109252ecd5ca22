"""Multi-LoRA: the adapters a model serves, from `multi_lora.json` beside model.json.

    {"sql": "/models/adapters/sql", "chat": "./chat-adapter"}

A request picks one with the sampling parameter `lora_name`.  A config.pbtxt that wants
clients (the OpenAI frontend) to list the adapters names them in the `vllm_lora_names`
parameter, which must agree with this file.
"""

from __future__ import annotations

from pathlib import Path

from .engine_config import MULTI_LORA_JSON, ConfigError, parameter, read_json_object
from .wire import LORA_NAMES_PARAMETER


def load_adapters(version_dir: Path | str, enable_lora: bool) -> dict[str, Path]:
    path = Path(version_dir) / MULTI_LORA_JSON
    if not path.is_file():
        return {}
    if not enable_lora:
        raise ConfigError(f"{path} lists LoRA adapters, but model.json does not set "
                          f"\"enable_lora\": true")
    data = read_json_object(path, "map adapter names to adapter folders")
    adapters = {}
    for name, folder in data.items():
        if not isinstance(folder, str):
            raise ConfigError(f"{path}: adapter '{name}' must name a folder")
        folder_path = (Path(version_dir) / folder).resolve()
        if not (folder_path / "adapter_config.json").is_file():
            raise ConfigError(f"{path}: adapter '{name}': no adapter_config.json in {folder_path}")
        adapters[name] = folder_path
    return adapters



def check_published(params: dict, adapters: dict[str, Path]) -> None:
    """`vllm_lora_names`, when config.pbtxt sets it, names exactly the served adapters:
    clients list and route by it, so a stale list would send them to adapters that do
    not exist, or hide ones that do."""
    value = parameter(params, LORA_NAMES_PARAMETER)
    if value is None:
        return
    published = [name.strip() for name in value.split(",") if name.strip()]
    served = sorted(adapters)
    if sorted(published) != served:
        raise ConfigError(f"config.pbtxt parameter '{LORA_NAMES_PARAMETER}' is '{value}', but "
                          f"{MULTI_LORA_JSON} serves: {', '.join(served) or 'no adapters'}")


class UnknownAdapter(ValueError):
    pass


def adapter_id(adapters: dict[str, Path], name: str) -> tuple[int, Path]:
    """vLLM wants a stable positive integer id per adapter besides its name."""
    if name not in adapters:
        known = ", ".join(sorted(adapters)) or "none"
        raise UnknownAdapter(f"unknown LoRA adapter '{name}' (this model serves: {known})")
    return sorted(adapters).index(name) + 1, adapters[name]

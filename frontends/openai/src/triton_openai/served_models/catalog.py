"""Which Triton models the frontend serves, under which names.

A model is served when its config carries the vLLM backend's `vllm_model` parameter;
`vllm_runner: pooling` makes it an embedding model.  The catalog is refreshed from
Triton's repository index, so models loaded later show up without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from ..triton import vllm_contract as wire
from ..triton.client import ModelInfo, TritonClient
from ..web.errors import BadRequestError, ModelNotFoundError, ServiceUnavailableError

log = logging.getLogger("triton_openai")


@dataclass(frozen=True)
class ServedModel:
    id: str  # the name clients use
    triton_name: str
    model_path: str | None
    runner: str  # "generate" or "pooling"
    max_model_len: int | None
    created: int
    parent: str | None = None  # for LoRA adapters: the base model's id
    lora_name: str | None = None


def _runner_from_outputs(outputs: tuple[str, ...]) -> str:
    # A config.pbtxt without the discovery parameters still shows what the model does.
    if wire.EMBEDDING in outputs and wire.TEXT_OUTPUT not in outputs:
        return wire.POOLING
    return wire.GENERATE


def _public_names(names: dict[str, str | list[str]], triton_name: str) -> list[str]:
    given = names.get(triton_name) or [triton_name]
    return [given] if isinstance(given, str) else list(given)


def _served_models(info: ModelInfo, names: dict[str, str | list[str]],
                   created: int) -> list[ServedModel]:
    """The model under each of its public names, and each LoRA adapter under each."""
    params = info.parameters
    if wire.MODEL_PARAMETER not in params and info.backend != "vllm":
        return []
    runner = params.get(wire.RUNNER_PARAMETER) or _runner_from_outputs(info.outputs)
    max_len = params.get(wire.MAX_MODEL_LEN_PARAMETER)
    out = []
    for public in _public_names(names, info.name):
        base = ServedModel(
            id=public, triton_name=info.name,
            model_path=params.get(wire.MODEL_PARAMETER) or None, runner=runner,
            max_model_len=int(max_len) if max_len and max_len.isdigit() else None,
            created=created)
        out.append(base)
        # LoRA adapters the backend loaded from multi_lora.json, published as a comma list.
        for lora in filter(None, (params.get(wire.LORA_NAMES_PARAMETER) or "").split(",")):
            lora = lora.strip()
            out.append(ServedModel(
                id=f"{base.id}:{lora}", triton_name=info.name, model_path=base.model_path,
                runner=runner, max_model_len=base.max_model_len, created=created,
                parent=base.id, lora_name=lora))
    return out


class ModelCatalog:
    def __init__(self, client: TritonClient,
                 served_names: dict[str, str | list[str]] | None = None,
                 max_age: float = 5.0):
        self._client = client
        self._names = served_names or {}
        self._max_age = max_age
        self._models: dict[str, ServedModel] = {}
        self._fetched = 0.0
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self._created = int(time.time())
        # Triton models found unable to serve, and why (health/model_watch.py keeps it):
        # requests for them are answered here, without a trip to Triton.
        self.dead: dict[str, str] = {}

    async def refresh(self, force: bool = False) -> dict[str, ServedModel]:
        """The served models; refetched when older than max_age, or when forced.

        Once a first index is known, an old one is answered at once and refreshed in
        the background: requests never wait on Triton's repository calls, which can
        take a while on a busy server.
        """
        stale = time.monotonic() - self._fetched >= self._max_age
        if force or not self._fetched:
            return await self._fetch()
        if stale and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._fetch_quietly())
        return self._models

    async def _fetch_quietly(self) -> None:
        try:
            await self._fetch()
        except Exception as err:  # the next request retries; a dead Triton shows in readiness
            log.warning("could not refresh the model list: %s", err)

    async def _fetch(self) -> dict[str, ServedModel]:
        async with self._lock:
            infos = await self._client.list_models()
            models = {}
            for info in infos:
                if info.ready:
                    for m in _served_models(info, self._names, self._created):
                        models[m.id] = m
            self._models = models
            self._fetched = time.monotonic()
            return models

    async def list(self) -> list[ServedModel]:
        return list((await self.refresh()).values())

    async def get(self, model_id: str, runner: str | None = None) -> ServedModel:
        """The model a request names; with `runner`, one the request will run on, which
        a dead model is not (503)."""
        models = await self.refresh()
        model = models.get(model_id)
        if model is None and time.monotonic() - self._fetched > 1.0:
            # A model loaded a moment ago: look again before giving up (at most once a
            # second, so that a stream of bad names does not become a stream of RPCs).
            model = (await self.refresh(force=True)).get(model_id)
        if model is None:
            raise ModelNotFoundError(f"The model `{model_id}` does not exist.", param="model")
        if runner is not None and model.runner != runner:
            kind = "embedding" if runner == wire.POOLING else "text generation"
            raise BadRequestError(f"The model `{model_id}` does not serve {kind}.", param="model")
        if runner is not None and model.triton_name in self.dead:
            raise ServiceUnavailableError(
                f"The model `{model_id}` cannot serve now: {self.dead[model.triton_name]}")
        return model

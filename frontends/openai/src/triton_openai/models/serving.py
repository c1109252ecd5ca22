"""The logic of /v1/models."""

from __future__ import annotations

from ..served_models.catalog import ModelCatalog, ServedModel
from .protocol import ModelCard, ModelList


def _card(m: ServedModel) -> ModelCard:
    return ModelCard(id=m.id, created=m.created, root=m.triton_name, parent=m.parent,
                     max_model_len=m.max_model_len)


class ModelsServing:
    def __init__(self, catalog: ModelCatalog):
        self.catalog = catalog

    async def list(self) -> ModelList:
        return ModelList(data=[_card(m) for m in await self.catalog.list()])

    async def get(self, model_id: str) -> ModelCard:
        return _card(await self.catalog.get(model_id))

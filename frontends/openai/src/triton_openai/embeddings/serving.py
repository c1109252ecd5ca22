"""The logic of /v1/embeddings: one Triton request per input, run concurrently."""

from __future__ import annotations

import asyncio
import base64
import struct

from fastapi.responses import Response

from ..config import FrontendConfig
from ..served_models.catalog import ModelCatalog
from ..triton import vllm_io
from ..triton.client import TritonClient
from ..triton.vllm_contract import POOLING
from ..web import request_ids
from ..web.answers import json_response
from ..web.errors import BadRequestError
from .protocol import EmbeddingRequest


def _inputs(req: EmbeddingRequest) -> list[str | list[int]]:
    x = req.input
    if isinstance(x, str):
        return [x]
    if all(isinstance(i, int) for i in x):
        return [x]
    return list(x)


class EmbeddingsServing:
    def __init__(self, client: TritonClient, catalog: ModelCatalog,
                 max_batch_inputs: int = FrontendConfig.max_batch_inputs):
        self.client = client
        self.catalog = catalog
        self.max_batch_inputs = max_batch_inputs

    async def create(self, req: EmbeddingRequest) -> Response:
        items = _inputs(req)
        if len(items) > self.max_batch_inputs:  # each input is a Triton request
            raise BadRequestError(
                f"input has {len(items)} items; the server takes at most "
                f"{self.max_batch_inputs} per request.", param="input")
        model = await self.catalog.get(req.model, runner=POOLING)
        if any(isinstance(i, str) and i == "" for i in items):
            raise BadRequestError("input must not contain empty strings", param="input")
        results = await asyncio.gather(*(
            vllm_io.embed(self.client, model.triton_name, request_ids.current(),
                          text=i if isinstance(i, str) else None,
                          ids=list(i) if not isinstance(i, str) else None)
            for i in items))
        data, total = [], 0
        for idx, (vec, n_in) in enumerate(results):
            if req.dimensions is not None and req.dimensions != len(vec):
                raise BadRequestError(
                    f"this model makes {len(vec)}-dimensional embeddings; dimensions "
                    f"{req.dimensions} is not supported", param="dimensions")
            total += n_in or (len(items[idx]) if not isinstance(items[idx], str) else 0)
            emb = (base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
                   if req.encoding_format == "base64" else vec)
            data.append({"object": "embedding", "index": idx, "embedding": emb})
        return json_response({"object": "list", "data": data, "model": model.id,
                              "usage": {"prompt_tokens": total, "total_tokens": total}})

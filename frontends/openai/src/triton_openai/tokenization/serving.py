"""The logic of /tokenize and /detokenize: the model's own tokenizer and chat template,
exactly as a chat or completion request would use them."""

from __future__ import annotations

from typing import Any

from ..conversation.templating import messages_for_template, render
from ..generation.service import GenerationService
from ..served_models.catalog import ServedModel
from ..web.errors import BadRequestError
from .protocol import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse


class TokenizationServing:
    def __init__(self, generation: GenerationService, chat_template: str | None = None):
        self.gen = generation
        self.chat_template = chat_template

    async def _model(self, model_id: str | None) -> ServedModel:
        if model_id is not None:
            return await self.gen.catalog.get(model_id)
        models = await self.gen.catalog.list()
        if len({m.triton_name for m in models}) != 1:
            raise BadRequestError("model is required when the server serves several models",
                                  param="model")
        return models[0]

    async def _tokenizer(self, model: ServedModel) -> Any:
        tok = await self.gen.tokenizer(model)
        if tok is None:
            raise BadRequestError(f"the tokenizer of `{model.id}` is not visible to the frontend; "
                                  "start it with --tokenizer DIR", param="model")
        return tok

    async def tokenize(self, req: TokenizeRequest) -> TokenizeResponse:
        model = await self._model(req.model)
        tok = await self._tokenizer(model)
        if req.messages is not None:
            tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
            text, ids = render(tok, messages_for_template(req.messages),
                               req.chat_template or self.chat_template, tools,
                               req.add_generation_prompt, req.continue_final_message,
                               req.chat_template_kwargs)
            if req.add_special_tokens:
                ids = tok.encode(text, add_special_tokens=True)
        else:
            add = True if req.add_special_tokens is None else req.add_special_tokens
            ids = tok.encode(req.prompt, add_special_tokens=add)
        strs = tok.convert_ids_to_tokens(ids) if req.return_token_strs else None
        return TokenizeResponse(count=len(ids), max_model_len=self.gen.budget.max_model_len(model),
                                tokens=ids, token_strs=strs)

    async def detokenize(self, req: DetokenizeRequest) -> DetokenizeResponse:
        model = await self._model(req.model)
        tok = await self._tokenizer(model)
        vocab = len(tok)
        bad = [t for t in req.tokens if not 0 <= t < vocab]
        if bad:
            raise BadRequestError(f"token id {bad[0]} is not in the vocabulary (0..{vocab - 1})",
                                  param="tokens")
        return DetokenizeResponse(prompt=tok.decode(req.tokens))

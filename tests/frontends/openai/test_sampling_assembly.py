"""The one sampling assembly of completions, chat completions and the Responses API: the
request's fields over the generation config, the token budget, logprobs and the one
structured-outputs constraint."""

import json

import pytest

from triton_openai.generation.prompts import Prompt
from triton_openai.generation.service import GenerationService
from triton_openai.served_models.catalog import ServedModel
from triton_openai.served_models.sampling_defaults import SamplingDefaults
from triton_openai.served_models.tokenizers import TokenizerCache
from triton_openai.web.errors import BadRequestError

MODEL = ServedModel(id="m", triton_name="m", model_path=None, runner="generate",
                    max_model_len=100, created=0)


@pytest.fixture
def generation(tmp_path):
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"temperature": 0.6, "top_p": 0.9, "max_new_tokens": 50}))
    return GenerationService(None, None, TokenizerCache(), SamplingDefaults(str(tmp_path)),
                             compact_json=True)


TEN_TOKENS = Prompt("hi", [1] * 10)


def _sampling(generation, fields, prompt=TEN_TOKENS, **kwargs):
    kwargs.setdefault("max_tokens", None)
    return generation.sampling(MODEL, prompt, fields, max_tokens_param="max_tokens",
                               prompt_param="prompt", **kwargs)


def test_the_request_wins_over_the_generation_config_which_caps_the_default_budget(generation):
    assert _sampling(generation, {"n": 1, "temperature": 0}) == {
        "temperature": 0, "top_p": 0.9, "n": 1, "max_tokens": 50}
    assert _sampling(generation, {}, prompt=Prompt("hi", [1] * 80))["max_tokens"] == 20
    assert _sampling(generation, {}, max_tokens=70)["max_tokens"] == 70


def test_a_budget_past_the_context_names_the_parameter(generation):
    with pytest.raises(BadRequestError) as err:
        _sampling(generation, {}, max_tokens=95)
    assert err.value.param == "max_tokens"


def test_logprobs_and_one_structured_constraint(generation):
    s = _sampling(generation, {}, logprobs=0, constraint={"json": {"type": "object"}},
                  structured_outputs={"disable_any_whitespace": False})
    assert s["logprobs"] == 0
    assert s["structured_outputs"] == {"json": {"type": "object"},
                                       "disable_any_whitespace": False}
    compact = _sampling(generation, {}, structured_outputs={"json": {}})
    assert compact["structured_outputs"] == {"json": {}, "disable_any_whitespace": True}
    assert "structured_outputs" not in _sampling(generation, {})
    with pytest.raises(BadRequestError):
        _sampling(generation, {}, constraint={"json": {}}, structured_outputs={"regex": "a"})

import json

import pytest
from triton_vllm_backend.stub.params import ParameterError, parse_sampling_parameters

FIELDS = {"n", "temperature", "top_p", "max_tokens", "stop", "seed", "logprobs", "ignore_eos",
          "stop_token_ids", "structured_outputs", "logit_bias", "min_p"}


def parse(obj):
    return parse_sampling_parameters(json.dumps(obj), FIELDS)


def test_numbers_and_flags_given_as_strings_are_coerced():
    assert parse({"max_tokens": "16", "temperature": "0.5", "top_p": 1, "n": "2",
                  "ignore_eos": "true", "seed": 3.0}) == {
        "max_tokens": 16, "temperature": 0.5, "top_p": 1.0, "n": 2, "ignore_eos": True,
        "seed": 3}


def test_lists_may_come_json_encoded_or_single():
    assert parse({"stop": "END"}) == {"stop": ["END"]}
    assert parse({"stop": '["a", "b"]'}) == {"stop": ["a", "b"]}
    assert parse({"stop_token_ids": "[1, 2]"}) == {"stop_token_ids": [1, 2]}
    assert parse({"logit_bias": {"5": "-1.5"}}) == {"logit_bias": {5: -1.5}}


def test_empty_and_missing_parameters():
    assert parse_sampling_parameters(None, FIELDS) == {}
    assert parse_sampling_parameters(b"  ", FIELDS) == {}
    assert parse({"stream": True, "top_p": None}) == {}


def test_null_max_tokens_asks_for_the_whole_context_not_the_default():
    assert parse({"max_tokens": None}) == {"max_tokens": None}


@pytest.mark.parametrize("obj, words", [
    ({"max_tokens": "lots"}, ["max_tokens", "integer"]),
    ({"max_tokens": True}, ["max_tokens"]),
    ({"temperature": "warm"}, ["temperature", "number"]),
    ({"ignore_eos": "maybe"}, ["ignore_eos"]),
    ({"bogus": 1}, ["unknown sampling parameter 'bogus'"]),
    ({"stop": [1, 2]}, ["stop"]),
    ({"lora_name": ""}, ["lora_name"]),
    ({"structured_outputs": {"jsn": {}}}, ["jsn"]),
    ({"structured_outputs": "yes"}, ["structured_outputs"]),
])
def test_bad_values_name_the_key(obj, words):
    with pytest.raises(ParameterError) as error:
        parse(obj)
    for word in words:
        assert word in str(error.value)


def test_not_json_or_not_an_object():
    with pytest.raises(ParameterError, match="not valid JSON"):
        parse_sampling_parameters("{max_tokens: 3", FIELDS)
    with pytest.raises(ParameterError, match="JSON object"):
        parse_sampling_parameters("[1]", FIELDS)


def test_structured_outputs_and_lora_name_are_kept_for_the_caller():
    schema = {"type": "object"}
    out = parse({"structured_outputs": {"json": json.dumps(schema), "choice": '["a","b"]',
                                        "json_object": "false"},
                 "lora_name": "sql"})
    assert out == {"structured_outputs": {"json": schema, "choice": ["a", "b"],
                                          "json_object": False},
                   "lora_name": "sql"}

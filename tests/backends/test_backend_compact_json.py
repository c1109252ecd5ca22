"""Compact JSON per request: a JSON constraint becomes a grammar without free whitespace."""

import pytest
from triton_vllm_backend.stub import compact_json

xgrammar = pytest.importorskip("xgrammar")
from xgrammar.testing import _is_grammar_accept_string as accepts  # noqa: E402

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"},
                                           "b": {"type": "array", "items": {"type": "string"}}},
          "required": ["a", "b"]}


@pytest.mark.parametrize("constraint,compact,spaced", [
    ({"json": SCHEMA}, '{"a":1,"b":["x","y"]}', '{"a": 1, "b": ["x", "y"]}'),
    ({"json": '{"type": "object"}'}, '{"k":[1]}', '{ "k": [1] }'),
    ({"json_object": True}, '{"k":{"m":null}}', '{"k":\n{"m":null}}'),
])
def test_a_json_constraint_that_asks_for_compact_json_becomes_a_grammar(constraint, compact,
                                                                         spaced):
    out = compact_json.enforce({**constraint, "disable_any_whitespace": True}, False)
    assert set(out) == {"grammar", "disable_any_whitespace"}
    assert accepts(out["grammar"], compact)
    assert not accepts(out["grammar"], spaced)


@pytest.mark.parametrize("structured,engine_compact", [
    ({"json": SCHEMA}, False),  # not asked
    ({"json": SCHEMA, "disable_any_whitespace": True}, True),  # the engine does it already
    ({"regex": "a+", "disable_any_whitespace": True}, False),  # nothing to take away
])
def test_other_constraints_go_to_vllm_as_they_are(structured, engine_compact):
    assert compact_json.enforce(structured, engine_compact) is structured


def test_the_engine_is_compact_by_its_structured_outputs_config():
    assert compact_json.engine_is_compact(
        {"structured_outputs_config": {"disable_any_whitespace": True}})
    assert not compact_json.engine_is_compact({"model": "m"})

import json

import numpy as np
from triton_vllm_backend.stub.io_spec import inputs_for, outputs_for
from triton_vllm_backend.stub.outputs import Wanted, generate_outputs, new_tokens, pooling_outputs
from vllm_fakes import Choice, Logprob, Pooled, PoolingResult, Result

ALL = Wanted(True, True, True, True, True)


def test_complete_answer_with_every_output():
    lp = [{7: Logprob(-0.1, 1, "a"), 8: Logprob(-2.0, 2, "b")},
          {9: Logprob(-0.5, 1, "c")}]
    result = Result([Choice(0, "ac", [7, 9], -0.6, lp, "length")])
    out = generate_outputs(result, 1, ALL, prefix="P:")
    assert set(out) == {o["name"] for o in outputs_for("generate")}  # what auto-complete declares
    assert out["text_output"].tolist() == [b"P:ac"]
    assert out["finish_reason"].tolist() == [b"length"]
    assert out["cumulative_logprob"].dtype == np.float32
    assert out["num_input_tokens"].tolist() == [3] and out["num_input_tokens"].dtype == np.uint32
    assert out["num_output_tokens"].tolist() == [2]
    entries = json.loads(out["logprobs"][0])
    assert [e["token_id"] for e in entries] == [7, 9]
    assert entries[0]["token"] == "a" and entries[0]["logprob"] == -0.1
    assert [a["token_id"] for a in entries[0]["top_logprobs"]] == [7, 8]


def test_only_requested_outputs():
    out = generate_outputs(Result([Choice(0, "x", [1])]), 1, Wanted())
    assert set(out) == {"text_output"}


def test_stream_delta_per_choice():
    # With vLLM's DELTA kind, an output holds only the choices that moved, with only
    # their new text and tokens; the others answer empty in their slot.
    first = Result([Choice(0, "He", [1])])
    out = generate_outputs(first, 2, ALL)
    assert out["text_output"].tolist() == [b"He", b""]
    assert out["num_output_tokens"].tolist() == [1, 0]
    assert out["finish_reason"].tolist() == [b"", b""]
    assert json.loads(out["logprobs"][1]) == []
    second = Result([Choice(1, "Yo", [3], finish_reason="stop")])
    out = generate_outputs(second, 2, ALL)
    assert out["text_output"].tolist() == [b"", b"Yo"]
    assert out["num_output_tokens"].tolist() == [0, 1]
    assert out["finish_reason"].tolist() == [b"", b"stop"]


def test_new_tokens_are_the_most_one_choice_brought():
    assert new_tokens(Result([Choice(0, "abc", [1, 2, 3]), Choice(1, "d", [4])])) == 3
    assert new_tokens(Result([])) == 0


def test_pooling_output():
    out = pooling_outputs(PoolingResult(Pooled([0.5, 1.5]), [1, 2]), Wanted(num_input_tokens=True))
    assert set(out) == {o["name"] for o in outputs_for("pooling")}
    assert out["embedding"].dtype == np.float32 and out["embedding"].tolist() == [0.5, 1.5]
    assert out["num_input_tokens"].tolist() == [2]


def test_io_spec_by_runner():
    generate_inputs = {i["name"] for i in inputs_for("generate")}
    assert {"text_input", "input_ids", "stream", "sampling_parameters"} <= generate_inputs
    assert all(i.get("optional") for i in inputs_for("generate"))
    assert {o["name"] for o in outputs_for("pooling")} == {"embedding", "num_input_tokens"}
    assert "text_output" in {o["name"] for o in outputs_for("generate")}

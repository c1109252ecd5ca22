"""The OpenAI frontend and the vLLM backend agree on what travels between them.

The two ship apart, so each keeps its own half of the names: the backend's
`triton_vllm_backend/stub/wire.py`, the frontend's `triton_openai/triton/vllm_contract.py`.
These tests compare the halves name by name, and feed what one side writes to the other
side's reader: a renamed tensor, parameter, key or error kind on either side fails here,
not in production.
"""

import json

import pytest
from triton_vllm_backend.stub import (
    abort,
    engine_config,
    errors,
    feed,
    health,
    io_spec,
    lora,
    params,
)
from triton_vllm_backend.stub import wire as backend_wire

from triton_openai.generation.structured import from_response_format, validate_structured_outputs
from triton_openai.served_models.catalog import _served_models
from triton_openai.triton import vllm_contract as wire
from triton_openai.triton import vllm_io
from triton_openai.triton.client import KIND_STATUS, ModelInfo, model_error
from triton_openai.web import sse
from triton_openai.web.errors import from_triton

# Triton's config data types as KServe names them on the wire.
KSERVE_TYPE = {"TYPE_STRING": "BYTES", "TYPE_BOOL": "BOOL", "TYPE_INT64": "INT64",
               "TYPE_FP32": "FP32", "TYPE_UINT32": "UINT32"}


def check_tensors(inputs, outputs, runner):
    """The inputs (by name and type) and outputs (by name) that the backend declares."""
    taken = {s["name"]: KSERVE_TYPE[s["data_type"]] for s in io_spec.inputs_for(runner)}
    made = {s["name"] for s in io_spec.outputs_for(runner)}
    wrong = {t.name: t.datatype for t in inputs if taken.get(t.name) != t.datatype}
    assert not wrong, f"inputs the backend does not take: {wrong}; it takes {taken}"
    missing = set(outputs) - made
    assert not missing, f"outputs the backend does not make: {missing}; it makes {made}"


GENERATION_REQUESTS = [
    vllm_io.GenerationRequest("m", "r", {"max_tokens": 3}, True, prompt_text="hi"),
    vllm_io.GenerationRequest("m", "r", {}, False, prompt_ids=[1, 2], logprobs=True),
]


@pytest.mark.parametrize("req", GENERATION_REQUESTS, ids=["text", "ids+logprobs"])
def test_generation_tensors_are_backend_inputs_and_outputs(req):
    inputs, outputs = vllm_io.build_inputs(req)
    check_tensors(inputs, outputs, backend_wire.GENERATE)


@pytest.mark.parametrize("text,ids", [("hi", None), (None, [1, 2])])
def test_embedding_tensors_are_backend_inputs_and_outputs(text, ids):
    inputs, outputs = vllm_io.build_embed_inputs(text, ids)
    check_tensors(inputs, outputs, backend_wire.POOLING)


def test_every_tensor_name_the_frontend_knows_is_the_backends():
    backend_names = {s["name"] for runner in (backend_wire.GENERATE, backend_wire.POOLING)
                     for s in io_spec.inputs_for(runner) + io_spec.outputs_for(runner)}
    frontend_names = {getattr(wire, key) for key in (
        "TEXT_INPUT", "INPUT_IDS", "STREAM", "SAMPLING_PARAMETERS", "EXCLUDE_INPUT_IN_OUTPUT",
        "RETURN_FINISH_REASON", "RETURN_LOGPROBS", "RETURN_NUM_INPUT_TOKENS",
        "RETURN_NUM_OUTPUT_TOKENS", "TEXT_OUTPUT", "FINISH_REASON", "LOGPROBS",
        "NUM_INPUT_TOKENS", "NUM_OUTPUT_TOKENS", "EMBEDDING")}
    assert not frontend_names - backend_names, f"not the backend's: {frontend_names - backend_names}"


def test_the_frontends_abort_request_names_its_target_for_the_backend():
    # What the HTTP client sends as request parameters, and the gRPC client as one
    # string parameter: the backend reads either as JSON or as a mapping.
    frontend_parameters = {wire.ABORT_PARAMETER: "cmpl-1"}
    assert abort.target_of(frontend_parameters) == "cmpl-1"
    assert abort.target_of(json.dumps(frontend_parameters)) == "cmpl-1"


def test_both_sides_declare_the_same_error_kinds():
    assert backend_wire.ERROR_KINDS == wire.ERROR_KINDS == set(KIND_STATUS)
    # Each under its own name on either side.
    assert {getattr(wire, kind.upper()) for kind in wire.ERROR_KINDS} == wire.ERROR_KINDS
    assert {getattr(backend_wire, kind.upper())
            for kind in backend_wire.ERROR_KINDS} == backend_wire.ERROR_KINDS


@pytest.mark.parametrize("kind", sorted(backend_wire.ERROR_KINDS))
def test_every_kind_the_backend_sends_is_read_back_with_the_status_of_the_table(kind):
    sent = backend_wire.tagged(kind, "sampling parameter 'n' must be 1")
    assert wire.read_error_kind(sent) == (kind, "sampling parameter 'n' must be 1")
    # Inside a stream (no status), and with any status a transport gave it.
    for transport_status in (500, 400, 503):
        err = model_error(sent, transport_status)
        assert (err.status, err.kind) == (KIND_STATUS[kind], kind)
        assert err.message == "sampling parameter 'n' must be 1"
        assert from_triton(err).status == KIND_STATUS[kind]


@pytest.mark.parametrize("error, status", [
    (params.ParameterError("sampling parameter 'max_tokens' must be an integer"), 400),
    (lora.UnknownAdapter("unknown LoRA adapter 'chat' (this model serves: sql)"), 400),
    (RuntimeError("CUDA error"), 500),
])
def test_what_the_backend_answers_a_failed_request_with_has_the_frontends_status(error,
                                                                                 status):
    assert model_error(backend_wire.tagged(*errors.described(error))).status == status


def test_a_dead_engines_error_is_a_503_to_the_frontend_inside_a_stream():
    # Inside a stream the error is text alone: its tag carries the kind.
    dead = health.dead_answer("m", RuntimeError("EngineCore encountered an issue"))
    assert model_error(backend_wire.tagged(*dead)).status == 503
    # Triton's own words for a dead stub (libtriton_python): a 503 too, not the 400 it has.
    assert model_error("Stub process 'm_0_0' is not healthy.", 400).status == 503


def test_the_watchs_health_request_is_what_the_backend_answers():
    from triton_vllm_backend import watch
    assert watch.HEALTH_PARAMETER == backend_wire.HEALTH_PARAMETER  # the wire's, imported
    assert health.is_health_check({watch.HEALTH_PARAMETER: True})
    assert health.is_health_check(json.dumps({watch.HEALTH_PARAMETER: True}))
    assert not health.is_health_check({watch.HEALTH_PARAMETER: "yes"})
    assert not abort.target_of({watch.HEALTH_PARAMETER: True})


def test_the_frontends_health_request_and_dead_answer_are_the_backends():
    # What the frontend's model watch sends (a mapping over HTTP, a bool parameter over
    # gRPC, which the Python backend hands the model as JSON)...
    assert health.is_health_check({wire.HEALTH_PARAMETER: True})
    assert health.is_health_check(json.dumps({wire.HEALTH_PARAMETER: True}))
    # ...and how it tells a dead engine's answer, as it arrives, from any other.
    sent = backend_wire.tagged(*health.dead_answer("m", RuntimeError("gone")))
    err = model_error(sent, 400)
    assert err.status == 503 and err.kind == wire.ENGINE_DEAD
    # The words stay for people, the same on both sides; no side reads them.
    assert err.message.endswith(wire.DEAD_PHRASE) and wire.DEAD_PHRASE == backend_wire.DEAD_PHRASE
    # A model that is only unloading is unavailable too (a 503), but not dead.
    unloading = model_error(backend_wire.tagged(backend_wire.UNAVAILABLE, "unloading"), 400)
    assert unloading.status == 503 and unloading.kind != wire.ENGINE_DEAD


@pytest.mark.parametrize("engine_args,runner", [
    ({"model": "/models/llm", "max_model_len": 64}, wire.GENERATE),
    ({"model": "/models/embed", "runner": "pooling"}, wire.POOLING),
])
def test_the_backends_discovery_parameters_describe_the_model_to_the_frontend(engine_args,
                                                                              runner):
    published = engine_config.published_parameters(engine_args)
    engine_config.check_published(published, engine_args)  # what the backend accepts
    [model] = _served_models(ModelInfo("llm", "1", True, published), {}, created=0)
    assert (model.model_path, model.runner, model.max_model_len) == (
        engine_args["model"], runner, engine_args.get("max_model_len"))


def test_the_published_lora_names_are_the_adapters_the_frontend_serves(tmp_path):
    adapters = {"sql": tmp_path, "chat": tmp_path}
    published = {backend_wire.LORA_NAMES_PARAMETER: "sql,chat"}
    lora.check_published(published, adapters)  # what the backend accepts
    models = _served_models(ModelInfo("llm", "1", True, {
        **engine_config.published_parameters({"model": "/m"}), **published}), {}, created=0)
    assert {m.lora_name for m in models} == {None, *adapters}
    assert {wire.MODEL_PARAMETER, wire.RUNNER_PARAMETER, wire.MAX_MODEL_LEN_PARAMETER,
            wire.LORA_NAMES_PARAMETER} == {*engine_config.PUBLISHED,
                                           backend_wire.LORA_NAMES_PARAMETER}


def test_structured_output_keys_agree():
    assert wire.STRUCTURED_CONSTRAINTS == backend_wire.STRUCTURED_CONSTRAINTS
    assert wire.STRUCTURED_OPTIONS == backend_wire.STRUCTURED_OPTIONS
    assert params.STRUCTURED_KEYS == wire.STRUCTURED_CONSTRAINTS | wire.STRUCTURED_OPTIONS


def test_what_the_frontend_sends_as_priority_the_backend_reads_and_checks():
    from triton_openai.chat.protocol import ChatCompletionRequest

    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}],
                                priority=-2)
    parsed = params.parse_sampling_parameters(json.dumps(req.sampling_dict()), known_fields={"n"})
    assert parsed[backend_wire.PRIORITY] == -2 and wire.PRIORITY == backend_wire.PRIORITY
    params.check_priority(parsed[backend_wire.PRIORITY], enabled=True)
    with pytest.raises(params.ParameterError) as refused:
        params.check_priority(parsed[backend_wire.PRIORITY], enabled=False)
    # What execute() answers a ParameterError with: a 400 to the frontend.
    assert model_error(backend_wire.tagged(backend_wire.INVALID_ARGUMENT,
                                           str(refused.value))).status == 400


def test_a_request_id_the_frontend_sends_leads_vllms_id_for_it():
    from triton_vllm_backend.stub import jobs

    from triton_openai.web import request_ids
    rid = request_ids.new_id()
    assert request_ids.is_valid(rid) and jobs.new_id(rid).startswith(f"{rid}-")


@pytest.mark.parametrize("constraint", [
    {"structural_tag": '{"type": "structural_tag"}'},
    {"choice": ["yes", "no"], "disable_any_whitespace": True},
    from_response_format({"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}),
])
def test_what_the_frontend_sends_as_sampling_parameters_the_backend_parses(constraint):
    sent = {"n": 1, "max_tokens": 8, wire.LORA_NAME: "sql",
            wire.STRUCTURED_OUTPUTS: validate_structured_outputs(constraint)}
    parsed = params.parse_sampling_parameters(json.dumps(sent), known_fields=set())
    assert parsed[backend_wire.LORA_NAME] == "sql"
    assert parsed[backend_wire.STRUCTURED_OUTPUTS] == constraint


# --------------------------------------------------------------------------- feeds
def test_both_sides_name_the_feeds_parameters_and_records_alike():
    assert (wire.FEED_OPEN_PARAMETER, wire.FEED_PARAMETER, wire.FEED_KEY_PARAMETER,
            wire.FEED_EVENT_PARAMETER) == (
        backend_wire.FEED_OPEN_PARAMETER, backend_wire.FEED_PARAMETER,
        backend_wire.FEED_KEY_PARAMETER, backend_wire.FEED_EVENT_PARAMETER)
    assert (wire.FEED_DATA, wire.FEED_END) == (backend_wire.FEED_DATA, backend_wire.FEED_END)


@pytest.mark.parametrize("text", ["hello", "", 'quote " and \\ backslash', "caf\u00e9 \u2028 \x85 \u2029",
                                  "\n\t\x00", "\U0001f600"])
@pytest.mark.parametrize("finish", [None, "stop", "length"])
def test_an_event_the_backend_encodes_is_the_one_the_frontend_would_write(text, finish):
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def body(t, f):
        return dict(head, choices=[{"index": 0, "delta": {"content": t}, "logprobs": None,
                                    "finish_reason": f}])

    cut = sse.template(body("", None), ("choices", 0, "delta", "content"),
                       ("choices", 0, "finish_reason"))
    # As the frontend sends it, and the backend reads it.
    parameters = {wire.FEED_PARAMETER: "0" * 32, wire.FEED_KEY_PARAMETER: "7",
                  wire.FEED_EVENT_PARAMETER: json.dumps(list(cut))}
    delivery = feed.delivery_of(json.dumps(parameters))
    assert delivery.key == b"7"
    assert delivery.template.event(text, finish) == sse.event(body(text, finish))


def test_a_feeds_open_request_and_its_records_reach_the_frontend():
    feed_id = "ab" * 16
    assert feed.open_request({wire.FEED_OPEN_PARAMETER: feed_id}) == feed_id
    end = feed.end_record("stop", 5, 9)
    assert end[:1] == wire.FEED_END
    assert json.loads(end[1:]) == {"finish_reason": "stop", "num_input_tokens": 5,
                                   "num_output_tokens": 9}


# ------------------------------------------------------------- the two halves, whole
# The backend's names that the frontend has no use for, each with why; every other name
# of either half is on the other, with the same value.
BACKEND_ONLY = {
    "RETURN_CUMULATIVE_LOGPROB": "the frontend asks for no cumulative logprob",
    "CUMULATIVE_LOGPROB": "the frontend asks for no cumulative logprob",
    "STUB_NOT_HEALTHY": "Triton's words: the frontend keeps them with its Triton client",
}


def _names(module) -> dict:
    return {name: value for name, value in vars(module).items() if name.isupper()}


def test_the_two_halves_of_the_contract_agree_field_by_field():
    from triton_openai.triton.client import STUB_NOT_HEALTHY

    frontend, backend = _names(wire), _names(backend_wire)
    assert set(frontend) - set(backend) == set(), "names the backend's half lacks"
    assert set(backend) - set(frontend) == set(BACKEND_ONLY), "names the frontend's half lacks"
    assert {name: backend[name] for name in frontend} == frontend
    assert backend_wire.STUB_NOT_HEALTHY == STUB_NOT_HEALTHY

"""The OpenAI frontend and the vLLM backend agree on what travels between them.

The two ship apart, so the frontend keeps its own copy of the names
(`triton_openai/triton/vllm_contract.py`).  These tests feed what one side writes to the
other side's reader: a renamed tensor, parameter or key on either side fails here, not
in production.
"""

import json

import pytest
from triton_vllm_backend import abort, engine_config, errors, feed, health, io_spec, lora, params

from triton_openai import sse
from triton_openai.catalog import _served_models
from triton_openai.errors import from_triton
from triton_openai.structured import from_response_format, validate_structured_outputs
from triton_openai.triton import vllm_contract as wire
from triton_openai.triton import vllm_io
from triton_openai.triton.client import KIND_STATUS, ModelInfo, model_error

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
    check_tensors(inputs, outputs, io_spec.GENERATE)


@pytest.mark.parametrize("text,ids", [("hi", None), (None, [1, 2])])
def test_embedding_tensors_are_backend_inputs_and_outputs(text, ids):
    inputs, outputs = vllm_io.build_embed_inputs(text, ids)
    check_tensors(inputs, outputs, io_spec.POOLING)


def test_every_tensor_name_the_frontend_knows_is_the_backends():
    backend_names = {s["name"] for runner in (io_spec.GENERATE, io_spec.POOLING)
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
    assert errors.KINDS == wire.ERROR_KINDS == set(KIND_STATUS)
    # Each under its own name on either side.
    assert {getattr(wire, kind.upper()) for kind in wire.ERROR_KINDS} == wire.ERROR_KINDS
    assert {getattr(errors, kind.upper()) for kind in errors.KINDS} == errors.KINDS


@pytest.mark.parametrize("kind", sorted(errors.KINDS))
def test_every_kind_the_backend_sends_is_read_back_with_the_status_of_the_table(kind):
    sent = errors.tagged(kind, "sampling parameter 'n' must be 1")
    assert wire.read_error_kind(sent) == (kind, "sampling parameter 'n' must be 1")
    # Inside a stream (no status), and with any status a transport gave it.
    for transport_status in (500, 400, 503):
        err = model_error(sent, transport_status)
        assert err.status == KIND_STATUS[kind]
        assert err.message == "sampling parameter 'n' must be 1"
        assert from_triton(err).status == KIND_STATUS[kind]


@pytest.mark.parametrize("error, status", [
    (params.ParameterError("sampling parameter 'max_tokens' must be an integer"), 400),
    (lora.UnknownAdapter("unknown LoRA adapter 'chat' (this model serves: sql)"), 400),
    (RuntimeError("CUDA error"), 500),
])
def test_what_the_backend_answers_a_failed_request_with_has_the_frontends_status(error,
                                                                                 status):
    assert model_error(errors.tagged(*errors.described(error))).status == status


def test_a_dead_engines_error_is_a_503_to_the_frontend_inside_a_stream():
    # Inside a stream the error is text alone: its tag carries the kind.
    message = health.dead_message("m", RuntimeError("EngineCore encountered an issue"))
    assert model_error(errors.tagged(errors.UNAVAILABLE, message)).status == 503
    # Triton's own words for a dead stub (libtriton_python): a 503 too, not the 400 it has.
    assert model_error("Stub process 'm_0_0' is not healthy.", 400).status == 503


def test_the_watchs_health_request_is_what_the_backend_answers():
    from triton_vllm_backend import watch  # noqa: F401 - the watch imports health's name
    assert health.is_health_check({health.PARAMETER: True})
    assert health.is_health_check(json.dumps({health.PARAMETER: True}))
    assert not health.is_health_check({health.PARAMETER: "yes"})
    assert not abort.target_of({health.PARAMETER: True})


def test_the_frontends_health_request_and_dead_answer_are_the_backends():
    # What the frontend's model watch sends (a mapping over HTTP, a bool parameter over
    # gRPC, which the Python backend hands the model as JSON)...
    assert health.is_health_check({wire.HEALTH_PARAMETER: True})
    assert health.is_health_check(json.dumps({wire.HEALTH_PARAMETER: True}))
    # ...and how it tells a dead engine's answer, as it arrives, from any other.
    sent = errors.tagged(errors.UNAVAILABLE, health.dead_message("m", RuntimeError("gone")))
    err = model_error(sent, 400)
    assert err.status == 503 and wire.DEAD_PHRASE in err.message
    assert wire.DEAD_PHRASE == health.DEAD_PHRASE


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
    published = {lora.PUBLISHED_NAMES: "sql,chat"}
    lora.check_published(published, adapters)  # what the backend accepts
    models = _served_models(ModelInfo("llm", "1", True, {
        **engine_config.published_parameters({"model": "/m"}), **published}), {}, created=0)
    assert {m.lora_name for m in models} == {None, *adapters}
    assert {wire.MODEL_PARAMETER, wire.RUNNER_PARAMETER, wire.MAX_MODEL_LEN_PARAMETER,
            wire.LORA_NAMES_PARAMETER} == {*engine_config.PUBLISHED, lora.PUBLISHED_NAMES}


def test_structured_output_keys_agree():
    assert wire.STRUCTURED_CONSTRAINTS == params.STRUCTURED_CONSTRAINTS
    assert wire.STRUCTURED_OPTIONS == params.STRUCTURED_OPTIONS


def test_what_the_frontend_sends_as_priority_the_backend_reads_and_checks():
    from triton_openai.chat.protocol import ChatCompletionRequest

    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}],
                                priority=-2)
    parsed = params.parse_sampling_parameters(json.dumps(req.sampling_dict()), known_fields={"n"})
    assert parsed[params.PRIORITY] == -2 and wire.PRIORITY == params.PRIORITY
    params.check_priority(parsed[params.PRIORITY], enabled=True)
    with pytest.raises(params.ParameterError) as refused:
        params.check_priority(parsed[params.PRIORITY], enabled=False)
    # What execute() answers a ParameterError with: a 400 to the frontend.
    assert model_error(errors.tagged(errors.INVALID_ARGUMENT, str(refused.value))).status == 400


def test_a_request_id_the_frontend_sends_leads_vllms_id_for_it():
    from triton_vllm_backend import jobs

    from triton_openai import request_ids
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
    assert parsed[params.LORA_NAME] == "sql"
    assert parsed[params.STRUCTURED_OUTPUTS] == constraint


# --------------------------------------------------------------------------- feeds
def test_both_sides_name_the_feeds_parameters_and_records_alike():
    assert (wire.FEED_OPEN_PARAMETER, wire.FEED_PARAMETER, wire.FEED_KEY_PARAMETER,
            wire.FEED_EVENT_PARAMETER) == (feed.OPEN_PARAMETER, feed.FEED_PARAMETER,
                                           feed.KEY_PARAMETER, feed.EVENT_PARAMETER)
    assert (wire.FEED_DATA, wire.FEED_END) == (feed.DATA, feed.END)


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

"""backends/vllm/model.py against a fake Triton stub module and a fake vLLM engine.

What runs for real: model.py's request handling, its event loop thread, the cancellation
poller, abort requests and the response tensors.  What is faked: the stub's
`triton_python_backend_utils` (fake_pb_utils.py) and vLLM's AsyncLLM (FakeEngine below),
so these tests need neither Triton nor vLLM; qa/L0_backend_vllm runs the real ones.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import threading
import time
from pathlib import Path

import fake_pb_utils as pb
import numpy as np
import pytest
from triton_vllm_backend.stub import coalesce, feed, io_spec, params, wire
from vllm_fakes import Choice, Pooled, PoolingResult, Result

MODEL_PY = Path(__file__).resolve().parents[2] / "backends" / "vllm" / "model.py"


@pytest.fixture(scope="module")
def model_module():
    sys.modules["triton_python_backend_utils"] = pb
    spec = importlib.util.spec_from_file_location("vllm_backend_model", MODEL_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    del sys.modules["triton_python_backend_utils"]


# ------------------------------------------------------------------ fake vLLM
class Sampling:  # vLLM's SamplingParams
    def __init__(self, n: int = 1, stream_interval: int | None = None):
        self.n, self.stream_interval = n, stream_interval


class FakeEngine:
    """Answers each prompt with the texts it is given, one step each; with `hold`, it
    then waits until it is aborted, as a long generation would."""

    def __init__(self, steps=("He", "llo"), hold=False, step_s=0.0):
        self.steps, self.hold, self.step_s = steps, hold, step_s
        self.started: list[str] = []
        self.aborted: list[str] = []
        self.priorities: list[int] = []
        self.intervals: list[int | None] = []  # each request's stream_interval
        self.running = threading.Event()
        self._abort = asyncio.Event()

    async def generate(self, prompt, sampling, request_id, lora_request=None, priority=0):
        self.started.append(request_id)
        self.priorities.append(priority)
        self.intervals.append(sampling.stream_interval)
        self.running.set()
        for i, text in enumerate(self.steps):
            if i and self.step_s:
                await asyncio.sleep(self.step_s)
            last = i == len(self.steps) - 1 and not self.hold
            yield Result([Choice(0, text, [i], finish_reason="stop" if last else None)],
                         finished=last, prompt=prompt.get("prompt", ""))
        if self.hold:
            await self._abort.wait()
            if self.errored:
                raise RuntimeError("EngineDeadError")
            yield Result([Choice(0, "", [], finish_reason="abort")])

    async def encode(self, prompt, pooling_params, request_id):
        yield PoolingResult(Pooled([0.25, 0.5]), [1, 2, 3])

    async def abort(self, ids):
        if self.errored:
            raise RuntimeError("EngineDeadError")
        self.aborted.extend([ids] if isinstance(ids, str) else ids)
        self._abort.set()

    # vLLM's AsyncLLM: `errored` once its engine-core process is gone.
    errored = False
    dead_error = RuntimeError("EngineCore encountered an issue")

    def die(self):
        """The engine-core process is killed: requests in flight get no more outputs."""
        self.errored = True

    def raise_in_flight(self, loop):
        """vLLM's output handler, later: EngineDeadError in each request in flight."""
        loop.call_soon_threadsafe(self._abort.set)

    def shutdown(self):
        pass



@pytest.fixture
def serve(model_module):
    models = []

    def start(engine, runner=wire.GENERATE):
        model = model_module.TritonPythonModel()
        model.logger, model.model_name, model.runner = pb.Logger, "m", runner
        model.health_check, model.stat_loggers = False, []
        # vLLM's SamplingParams, as far as model.py looks into it.
        def sampling_params(raw, stream, need_logprobs=False):
            parsed = params.parse_sampling_parameters(raw, {"stream_interval"})
            return (Sampling(parsed.get("n", 1), parsed.get("stream_interval")), None,
                    parsed.get(wire.PRIORITY, 0))

        model._sampling_params = sampling_params
        model._priority_scheduling = False
        model._pooling_params = lambda: None
        model._start_loop()
        model._serve_with(engine)
        models.append(model)
        return model

    yield start
    for model in models:
        model.finalize()
        # The loop's thread has stopped: let the cancelled poller end, here, and close it.
        model._loop.run_until_complete(_rest_of_tasks())
        model._loop.close()


async def _rest_of_tasks():
    others = asyncio.all_tasks() - {asyncio.current_task()}
    await asyncio.gather(*others, return_exceptions=True)


def text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=np.object_)


def switch(value: bool) -> np.ndarray:
    return np.array([value])


def generate_request(request_id="", stream=True, **inputs) -> pb.InferenceRequest:
    tensors = {"text_input": text("hi"), "stream": switch(stream),
               "return_finish_reason": switch(True), **inputs}
    return pb.InferenceRequest(tensors, request_id)


def texts(responses) -> list[list[bytes]]:
    return [r.outputs["text_output"].tolist() for r in responses if r is not None]


# ---------------------------------------------------------------------- tests
class FakeModelConfig:
    def __init__(self):
        self.inputs, self.outputs, self.policy, self.max_batch_size = [], [], None, None

    def add_input(self, spec):
        self.inputs.append(spec)

    def add_output(self, spec):
        self.outputs.append(spec)

    def set_max_batch_size(self, size):
        self.max_batch_size = size

    def set_model_transaction_policy(self, policy):
        self.policy = policy


@pytest.mark.parametrize("model_json,runner", [
    ({"model": "m"}, wire.GENERATE), ({"model": "m", "runner": "pooling"}, wire.POOLING)])
def test_auto_complete_declares_the_runners_tensors(model_module, monkeypatch, tmp_path,
                                                     model_json, runner):
    (tmp_path / "model.json").write_text(json.dumps(model_json))
    monkeypatch.setattr(model_module, "_version_dir_of_stub", lambda: tmp_path)
    config = model_module.TritonPythonModel.auto_complete_config(FakeModelConfig())
    assert config.inputs == io_spec.inputs_for(runner)
    assert config.outputs == io_spec.outputs_for(runner)
    assert config.max_batch_size == 0 and config.policy == {"decoupled": True}


def test_a_model_that_is_not_decoupled_fails_to_load(model_module, tmp_path):
    args = {"model_config": json.dumps({"parameters": {}}), "model_name": "m",
            "model_version": "1", "model_repository": str(tmp_path)}
    with pytest.raises(model_module.ConfigError, match="decoupled: true"):
        model_module.TritonPythonModel().initialize(args)


def test_per_token_metrics_alone_are_a_config_error(model_module, tmp_path):
    config = {"model_transaction_policy": {"decoupled": True},
              "parameters": {"REPORT_PER_TOKEN_METRICS": {"string_value": "true"}}}
    args = {"model_config": json.dumps(config), "model_name": "m", "model_version": "1",
            "model_repository": str(tmp_path)}
    with pytest.raises(model_module.ConfigError, match="set that too"):
        model_module.TritonPythonModel().initialize(args)


def test_a_stream_sends_each_step_then_the_last_as_final(serve):
    model = serve(FakeEngine(steps=("He", "llo")))
    request = generate_request(stream=True)
    model.execute([request])
    responses = request.sender.wait()
    assert texts(responses) == [[b"He"], [b"llo"]]
    assert responses[-1].outputs["finish_reason"].tolist() == [b"stop"]
    assert set(responses[-1].outputs) == {"text_output", "finish_reason"}  # only those asked


def test_a_request_s_inputs_are_made_once(serve):
    """The stub makes every input tensor anew on each request.inputs() (deserializing the
    BYTES ones in Python): the model walks them once, not once per input it looks for."""
    calls = []

    class Counted(pb.InferenceRequest):
        def inputs(self):
            calls.append(1)
            return super().inputs()

    model = serve(FakeEngine())
    request = Counted(generate_request(sampling_parameters=text('{"max_tokens": 2}'),
                                       return_num_output_tokens=switch(True)).tensors)
    model.execute([request])
    request.sender.wait()
    assert len(calls) == 1


def test_a_complete_answer_repeats_the_prompt_unless_excluded(serve):
    model = serve(FakeEngine(steps=("llo",)))
    repeated = generate_request(stream=False)
    excluded = generate_request(stream=False, exclude_input_in_output=switch(True))
    model.execute([repeated, excluded])
    assert texts(repeated.sender.wait()) == [[b"hillo"]]
    assert texts(excluded.sender.wait()) == [[b"llo"]]


def test_n_choices_come_as_arrays_of_n(serve):
    model = serve(FakeEngine(steps=("x",)))
    request = generate_request(stream=False, sampling_parameters=text('{"n": 2}'))
    model.execute([request])
    # The fake engine answers choice 0 only: choice 1 keeps its slot, empty.
    assert texts(request.sender.wait()) == [[b"hix", b""]]


@pytest.mark.parametrize("inputs,message", [
    ({"text_input": None}, "the request needs text_input or input_ids"),
    ({"sampling_parameters": text('{"tempreature": 1}')}, "unknown sampling parameter"),
])
def test_a_bad_request_gets_its_error_and_the_model_goes_on(serve, inputs, message):
    model = serve(FakeEngine(steps=("ok",)))
    engine = model.engine
    bad = generate_request(**inputs)
    bad.tensors = {k: v for k, v in bad.tensors.items() if v is not None}
    good = generate_request()
    model.execute([bad, good])
    [error] = bad.sender.wait()
    assert error.error.message().startswith("[invalid_argument] ")
    assert message in error.error.message() and error.error.code() == pb.TritonError.INVALID_ARG
    assert texts(good.sender.wait()) == [[b"ok"]] and len(engine.started) == 1


class FailingEngine(FakeEngine):
    """vLLM's AsyncLLM when a request fails in it at its first step: the error, raised as
    the cause of an EngineGenerateError that says nothing."""

    def __init__(self, cause):
        super().__init__()
        self.cause = cause

    def generate(self, prompt, sampling, request_id, lora_request=None, priority=0):
        return self

    def __aiter__(self):
        return self

    async def __anext__(self):
        raise RuntimeError() from self.cause


@pytest.mark.parametrize("cause, tag", [
    (ValueError("prompt is longer than the maximum model length"), "[invalid_argument] "),
    (RuntimeError("CUDA error: an illegal memory access"), "[internal] "),
])
def test_a_request_that_fails_in_vllm_gets_the_kind_of_its_cause(serve, cause, tag):
    model = serve(FailingEngine(cause))
    request = generate_request()
    model.execute([request])
    [error] = request.sender.wait()
    assert error.error.message() == f"{tag}{type(cause).__name__}: {cause}"


def test_a_client_that_leaves_has_its_request_aborted_in_vllm(serve):
    engine = FakeEngine(steps=("He",), hold=True)
    model = serve(engine)
    request = generate_request()
    model.execute([request])
    assert engine.running.wait(5)
    request.sender.cancelled = True
    responses = request.sender.wait()
    assert engine.aborted == engine.started
    assert responses[-1] is None  # the final flag alone: nobody reads an answer


class CountingSender(pb.ResponseSender):
    """Counts the asks: each is a round trip to tritonserver in the real stub."""

    def __init__(self):
        super().__init__()
        self.asks = 0

    def is_cancelled(self) -> bool:
        self.asks += 1
        return super().is_cancelled()


def test_clients_are_asked_whether_they_left_a_few_times_a_second_not_per_poll(serve,
                                                                            model_module):
    engine = FakeEngine(steps=("He",), hold=True)
    model = serve(engine)
    request = generate_request()
    request.sender = CountingSender()
    model.execute([request])
    assert engine.running.wait(5)
    time.sleep(1.0)
    # The poller wakes every POLL_S (20 times a second) for the engine's health, but
    # asks each client at most every CANCEL_POLL_S.
    assert 1 <= request.sender.asks <= 1.0 / model_module.CANCEL_POLL_S + 2
    left = time.monotonic()
    request.sender.cancelled = True
    assert request.sender.wait()[-1] is None
    assert time.monotonic() - left < model_module.CANCEL_POLL_S + 0.5
    assert engine.aborted == engine.started


def test_an_abort_request_stops_the_running_request_with_that_id(serve):
    engine = FakeEngine(steps=("He",), hold=True)
    model = serve(engine)
    request = generate_request(request_id="cmpl-1")
    model.execute([request])
    assert engine.running.wait(5)
    abort = pb.InferenceRequest(parameters={"vllm_abort_request_id": "cmpl-1"})
    model.execute([abort])
    assert abort.sender.wait() == [None]
    assert request.sender.wait()[-1] is None
    assert engine.aborted[:1] == engine.started


def test_an_abort_that_comes_first_answers_its_request_without_generating(serve):
    engine = FakeEngine()
    model = serve(engine)
    abort = pb.InferenceRequest(parameters={"vllm_abort_request_id": "cmpl-1"})
    model.execute([abort])
    abort.sender.wait()
    request = generate_request(request_id="cmpl-1")
    model.execute([request])
    assert request.sender.wait() == [None] and engine.started == []


def test_a_bad_abort_request_gets_an_error(serve):
    model = serve(FakeEngine())
    abort = pb.InferenceRequest(parameters={"vllm_abort_request_id": ""})
    model.execute([abort])
    [error] = abort.sender.wait()
    assert "must be a non-empty request id" in error.error.message()


def test_an_embedding_model_answers_with_the_vector(serve):
    model = serve(FakeEngine(), runner=wire.POOLING)
    request = pb.InferenceRequest({"text_input": text("hi"),
                                   "return_num_input_tokens": switch(True)})
    model.execute([request])
    [response] = request.sender.wait()
    assert response.outputs["embedding"].tolist() == [0.25, 0.5]
    assert response.outputs["num_input_tokens"].tolist() == [3]


def test_vllms_request_id_leads_with_the_triton_request_id(serve):
    engine = FakeEngine(steps=("He",))
    model = serve(engine)
    first, second = generate_request(request_id="trace-7"), generate_request(request_id="trace-7")
    model.execute([first, second])
    first.sender.wait(), second.sender.wait()
    assert all(rid.startswith("trace-7-") for rid in engine.started)
    assert len(set(engine.started)) == 2  # unique in vLLM even when the client's ids are not


def test_priority_reaches_vllm_only_where_the_model_schedules_by_it(serve):
    engine = FakeEngine(steps=("He",))
    model = serve(engine)
    refused = generate_request(sampling_parameters=text(json.dumps({"priority": 5})))
    model.execute([refused])
    [error] = refused.sender.wait()
    assert "invalid" in error.error.message() and "scheduling_policy" in error.error.message()
    assert engine.started == []
    model._priority_scheduling = True
    accepted = generate_request(sampling_parameters=text(json.dumps({"priority": -3})))
    model.execute([accepted])
    accepted.sender.wait()
    assert engine.priorities == [-3]


def test_a_request_still_running_at_unload_gets_an_error_not_a_silent_end(serve, model_module):
    engine = FakeEngine(steps=("He",), hold=True)
    model = serve(engine)
    request = generate_request()
    model.execute([request])
    assert engine.running.wait(5)
    model.finalize()
    responses = request.sender.wait()
    assert texts(responses[:1]) == [[b"He"]]
    errors = [r for r in responses if r is not None and r.error is not None]
    assert [e.error.message() for e in errors] == [f"[unavailable] {model_module.UNLOADING_MESSAGE}"]
    # Nothing that reads as an answer after it (at most the bare final flag).
    assert all(r is None for r in responses[responses.index(errors[0]) + 1:])
    assert engine.aborted == engine.started



def test_streams_get_every_token_until_the_stub_falls_behind(serve):
    model = serve(FakeEngine(steps=("x",), hold=True))
    model._max_interval = 4
    model._lag = coalesce.LagMeter(4)
    first = [generate_request(f"s{i}") for i in range(3)]
    model.execute(first)
    _wait_for(lambda: len(model.engine.intervals) == 3)
    # Many streams, no lag: every token as it comes.
    assert model.engine.intervals == [1, 1, 1]
    # Responses that bring more than they asked for: the stub fell behind.
    for _ in range(100):
        model._lag.observe(3, 1)
    later = [generate_request(f"t{i}") for i in range(3)]
    whole = generate_request("w", stream=False)
    own = generate_request("own", sampling_parameters=text('{"stream_interval": 1}'))
    model.execute([*later, whole, own])
    _wait_for(lambda: len(model.engine.intervals) == 8)
    # Up by the lag, once for the streams that start together (coalesce.STEP_S); a
    # complete answer is not a stream; a client's own interval is kept.
    assert model.engine.intervals[3:] == [3, 3, 3, None, 1]
    model._run(model.engine.abort(["all"]))
    for request in [*first, *later, own]:
        request.sender.wait()


def test_responses_that_bring_what_they_asked_for_say_the_stub_keeps_up(serve):
    model = serve(FakeEngine(steps=("a", "b", "c")))
    model._max_interval = 4
    model._lag = coalesce.LagMeter(4)
    request = generate_request()
    model.execute([request])
    request.sender.wait()
    assert model._lag.extra == 0


def test_a_slow_engine_keeps_responses_within_the_delay_bound(serve):
    model = serve(FakeEngine(steps=("x",), hold=True))
    model._max_interval, model._max_delay = 16, 0.030
    model._lag = coalesce.LagMeter(16)
    model._lag.extra, model._lag.interval = 10, 8  # far behind
    model._pace.seconds_per_token = 0.020  # one more token fits in 30 ms
    streams = [generate_request(f"s{i}") for i in range(3)]
    model.execute(streams)
    _wait_for(lambda: len(model.engine.intervals) == 3)
    assert model.engine.intervals == [2, 2, 2]
    model._run(model.engine.abort(["all"]))
    for request in streams:
        request.sender.wait()


def test_the_pace_is_told_by_the_gaps_between_a_streams_responses(serve):
    model = serve(FakeEngine(steps=("a", "b", "c", "d"), step_s=0.02))
    assert model._pace.seconds_per_token is None
    request = generate_request()
    model.execute([request])
    assert texts(request.sender.wait()) == [[b"a"], [b"b"], [b"c"], [b"d"]]
    # One token a response, 20 ms apart (the loop adds a little to each gap).
    assert 0.02 <= model._pace.seconds_per_token < 0.1


def test_coalescing_off_leaves_the_interval_to_vllm(serve):
    model = serve(FakeEngine(steps=("x",)))  # _max_interval 1: as on a vLLM without it
    requests = [generate_request(f"s{i}") for i in range(6)]
    model.execute(requests)
    for request in requests:
        request.sender.wait()
    assert model.engine.intervals == [None] * 6


def _wait_for(condition, timeout=5.0):
    import time
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# ------------------------------------------------------------------------ health
def test_a_health_check_is_answered_at_once_without_generating(serve):
    engine = FakeEngine()
    model = serve(engine)
    check = pb.InferenceRequest(parameters={"vllm_health_check": True})
    model.execute([check])
    [answer] = check.sender.wait()
    assert answer.outputs == {} and answer.error is None and engine.started == []


def test_a_dead_engine_ends_every_stream_in_flight_with_engine_dead(serve, model_module):
    """The poller finds the death (vLLM's `errored`), not the next request: streams that
    would otherwise wait for outputs that never come get their error at once."""
    engine = FakeEngine(steps=("He",), hold=True)
    model = serve(engine)
    requests = [generate_request(request_id=f"r{i}") for i in range(3)]
    model.execute(requests)
    assert engine.running.wait(5)
    started = time.monotonic()
    engine.die()
    for request in requests:
        last = request.sender.wait()[-1]
        assert last.error.code() == pb.TritonError.UNAVAILABLE
        assert last.error.message().startswith("[engine_dead] the vLLM engine of model 'm' died")
    assert time.monotonic() - started < 1.0
    engine.raise_in_flight(model._loop)
    time.sleep(0.2)
    # Each was answered once: the held generations end without a second final response.
    assert all(len([r for r in q.sender.responses if r is not None and r.error]) == 1
               for q in requests)


class CountingMetrics:  # metrics.ServingMetrics, as model.py calls it
    def __init__(self):
        self.errors: list[str] = []
        self.deaths = 0

    def error(self, kind):
        self.errors.append(kind)

    def engine_died(self):
        self.deaths += 1

    def close(self):
        self.closed = True


def test_every_error_answered_and_the_engines_death_are_counted(serve):
    engine = FakeEngine(steps=("He",), hold=True)
    model = serve(engine)
    model.serving_metrics = counted = CountingMetrics()
    bad = generate_request(sampling_parameters=text('{"tempreature": 1}'))
    model.execute([bad])
    bad.sender.wait()
    assert counted.errors == ["invalid_argument"]
    running = [generate_request(request_id=f"r{i}") for i in range(2)]
    model.execute(running)
    assert engine.running.wait(5)
    engine.die()
    for request in running:
        request.sender.wait()
    engine.raise_in_flight(model._loop)  # the held generations end
    assert counted.errors == ["invalid_argument", "engine_dead", "engine_dead"]
    assert counted.deaths == 1


def test_after_the_engine_died_requests_and_health_checks_get_engine_dead(serve):
    engine = FakeEngine()
    model = serve(engine)
    engine.die()
    deadline = time.monotonic() + 5
    while model._healthy and time.monotonic() < deadline:
        time.sleep(0.01)
    request, check = generate_request(), pb.InferenceRequest(
        parameters={"vllm_health_check": True})
    model.execute([request, check])
    for sender in (request.sender, check.sender):
        [answer] = sender.wait()
        assert answer.error.code() == pb.TritonError.UNAVAILABLE
        # The kind tells clients it is dead, not unavailable for a while; the words stay.
        assert wire.kind_of(answer.error.message()) == wire.ENGINE_DEAD
        assert answer.error.message().endswith(f"the server {wire.DEAD_PHRASE}")
    assert engine.started == []


class FailingHealthCheck(FakeEngine):
    """vLLM's check_health() on an engine whose core died since the poller looked."""

    async def check_health(self):
        raise RuntimeError("EngineCore encountered an issue")


def test_a_failed_health_check_answers_engine_dead(serve):
    """ENABLE_VLLM_HEALTH_CHECK: vLLM's own check before each batch of requests."""
    engine = FailingHealthCheck()
    model = serve(engine)
    model.health_check = True
    request = generate_request()
    model.execute([request])
    [answer] = request.sender.wait()
    assert answer.error.code() == pb.TritonError.UNAVAILABLE
    assert answer.error.message().startswith(
        "[engine_dead] the vLLM engine of model 'm' died (RuntimeError: EngineCore")
    assert engine.started == []


def test_each_requests_sampling_parameters_are_its_own_so_vllm_does_not_copy_them(model_module):
    vllm = pytest.importorskip("vllm")
    model = model_module.TritonPythonModel()
    model._SamplingParams = vllm.SamplingParams
    model._sampling_fields = set(vllm.SamplingParams.__struct_fields__)
    model._compact_json = False
    sampling, _, _ = model._sampling_params('{"max_tokens": 4, "temperature": 0}', stream=True)
    # vLLM's AsyncLLM deep-copies parameters that are not marked, on every request, as
    # its own server marks them.
    assert sampling.skip_clone and sampling.max_tokens == 4
    assert sampling.clone().max_tokens == 4
    # A vLLM without the field (the GPU image's 0.11) is not given it.
    model._sampling_fields.discard("skip_clone")
    sampling, _, _ = model._sampling_params('{"max_tokens": 4}', stream=False)
    assert not sampling.skip_clone


# ---------------------------------------------------------------------- feeds
FEED_ID = "f" * 32
EVENT = json.dumps(['{"t":', ',"f":', "}\n"])


def open_feed(model, feed_id=FEED_ID) -> pb.InferenceRequest:
    request = pb.InferenceRequest({}, "feed", parameters={wire.FEED_OPEN_PARAMETER: feed_id})
    model.execute([request])
    _wait_for(lambda: request.sender.responses)
    return request


def on_feed(request_id, key, feed_id=FEED_ID, **inputs) -> pb.InferenceRequest:
    request = generate_request(request_id, **inputs)
    request._parameters = json.dumps({wire.FEED_PARAMETER: feed_id, wire.FEED_KEY_PARAMETER: key,
                                      wire.FEED_EVENT_PARAMETER: EVENT})
    return request


def records(feed_request) -> list[tuple[bytes, bytes]]:
    """Every (key, record) the feed sent, in order, after its empty opening response."""
    sent = [r.outputs["text_output"].tolist() for r in feed_request.sender.responses if r]
    assert sent[0] == []
    flat = [x for response in sent[1:] for x in response]
    return list(zip(flat[::2], flat[1::2], strict=True))


def test_streams_on_a_feed_send_their_events_there_and_end_on_their_own(serve):
    model = serve(FakeEngine(steps=("He", "llo")))
    feed_request = open_feed(model)
    streams = [on_feed(f"s{i}", str(i)) for i in range(3)]
    model.execute(streams)
    for request in streams:
        answer = request.sender.wait()
        assert answer == [None], [r.error.message() for r in answer if r is not None and r.error]
    got = records(feed_request)
    for i in range(3):
        mine = [record for key, record in got if key == str(i).encode()]
        assert mine == [b'd{"t":"He","f":null}\n', b'd{"t":"llo","f":"stop"}\n',
                        b'e{"finish_reason":"stop","num_input_tokens":3,"num_output_tokens":2}']
    # The streams' records of a step go out together, not one response per stream.
    responses = [r for r in feed_request.sender.responses if r]
    assert len(responses) - 1 < len(got)


def test_a_stream_naming_a_feed_this_instance_lacks_gets_its_own_responses(serve):
    model = serve(FakeEngine(steps=("He", "llo")))
    request = on_feed("s", "1", feed_id="e" * 32)
    model.execute([request])
    assert texts(request.sender.wait()) == [[b"He"], [b"llo"]]


def test_a_feed_request_that_is_malformed_or_taken_gets_an_error(serve):
    model = serve(FakeEngine())
    open_feed(model)
    again = open_feed(model)
    assert "open already" in again.sender.wait()[-1].error.message()
    bad = pb.InferenceRequest({}, "feed", parameters={wire.FEED_OPEN_PARAMETER: "nope"})
    model.execute([bad])
    assert "32 lowercase hex" in bad.sender.wait()[-1].error.message()
    stream = on_feed("s", "")
    model.execute([stream])
    assert wire.FEED_KEY_PARAMETER in stream.sender.wait()[-1].error.message()


def test_a_feed_whose_client_left_is_closed_and_unload_ends_the_rest(serve, model_module):
    model = serve(FakeEngine())
    left, staying = open_feed(model, "a" * 32), open_feed(model, "b" * 32)
    left.sender.cancelled = True
    assert left.sender.wait()[-1] is None
    assert model._feeds.get("a" * 32) is None
    model.finalize()
    message = staying.sender.wait()[-1].error.message()
    assert message.startswith("[unavailable]") and "unloading" in message


def test_a_feed_that_carried_nothing_for_a_while_is_closed(serve, monkeypatch):
    """An open feed is a request in flight, which Triton waits for before it unloads the
    model: one whose client stopped sending streams must not hold a shutdown up."""
    monkeypatch.setattr(feed, "IDLE_S", 0.3)
    model = serve(FakeEngine(steps=("He", "llo")))
    feed_request = open_feed(model)
    stream = on_feed("s", "1")
    model.execute([stream])
    stream.sender.wait()
    assert feed_request.sender.wait(timeout=5)[-1] is None  # ended, not failed
    assert model._feeds.get(FEED_ID) is None
    # A stream that names it now is answered on its own responses.
    late = on_feed("t", "2")
    model.execute([late])
    assert texts(late.sender.wait()) == [[b"He"], [b"llo"]]


def test_a_dead_engine_ends_the_feeds_with_engine_dead(serve):
    model = serve(FakeEngine(steps=("x",), hold=True))
    feed_request = open_feed(model)
    model.engine.die()
    message = feed_request.sender.wait()[-1].error.message()
    assert message.startswith("[engine_dead]") and "cannot serve it" in message

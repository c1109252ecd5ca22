"""Engine health (triton_vllm_backend/stub/health.py): the health request, and the answer
a dead engine gives, which carries its kind."""

import json

from triton_vllm_backend.stub import health, wire


def test_a_health_request_is_its_parameter_set_to_true():
    assert health.is_health_check({wire.HEALTH_PARAMETER: True})
    assert health.is_health_check(json.dumps({wire.HEALTH_PARAMETER: True}))
    assert not health.is_health_check({wire.HEALTH_PARAMETER: "true"})
    assert not health.is_health_check(None)


class Engine:  # vLLM's AsyncLLM, as far as health.py reads it
    def __init__(self, errored=False, dead_error=None):
        self.errored, self.dead_error = errored, dead_error


def test_an_engine_is_dead_once_vllm_says_it_errored():
    assert health.death_of(None) is None
    assert health.death_of(Engine()) is None
    cause = RuntimeError("EngineCore encountered an issue")
    assert health.death_of(Engine(True, cause)) is cause
    assert isinstance(health.death_of(Engine(True)), RuntimeError)


def test_the_dead_answer_carries_the_engine_dead_kind_and_says_why_in_words():
    kind, message = health.dead_answer("llm", RuntimeError("EngineCore encountered an issue"))
    assert kind == wire.ENGINE_DEAD
    assert message == ("the vLLM engine of model 'llm' died (RuntimeError: EngineCore "
                       "encountered an issue); the server cannot serve it until it is "
                       "restarted")
    assert wire.kind_of(wire.tagged(kind, message)) == wire.ENGINE_DEAD
    assert health.dead_answer("llm", None)[1] == (
        "the vLLM engine of model 'llm' died; the server cannot serve it until it is "
        "restarted")

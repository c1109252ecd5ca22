"""Reading a request's tensors into what it asks for."""

import numpy as np
import pytest
from triton_vllm_backend.stub import io_spec, jobs, wire
from triton_vllm_backend.stub.outputs import Wanted


def getter(**tensors):
    """A request's tensors, and the names asked for."""
    asked = set()

    def get(name):
        asked.add(name)
        return tensors.get(name)
    return get, asked


def text(value):
    return np.array([value.encode()], dtype=np.object_)


def switch(value):
    return np.array([value])


def test_the_prompt_is_token_ids_else_text():
    get, _ = getter(text_input=text("hi"), input_ids=np.array([1, 2], dtype=np.int64))
    assert jobs.read_prompt(get) == {"prompt_token_ids": [1, 2]}
    get, _ = getter(text_input=text("hi"), input_ids=np.array([], dtype=np.int64))
    assert jobs.read_prompt(get) == {"prompt": "hi"}
    with pytest.raises(ValueError, match="needs text_input or input_ids"):
        jobs.read_prompt(getter()[0])


def test_wanted_outputs_follow_the_switches():
    get, _ = getter(return_finish_reason=switch(True), return_num_output_tokens=switch(True),
                    return_logprobs=switch(False))
    assert jobs.read_wanted(get) == Wanted(finish_reason=True, num_output_tokens=True)


def test_sampling_parameters_come_from_the_tensor_else_the_request_parameters():
    get, _ = getter(sampling_parameters=text('{"n": 2}'))
    assert jobs.read_generate_inputs(get, lambda: '{"n": 3}').sampling_parameters == b'{"n": 2}'
    assert jobs.read_generate_inputs(getter()[0], lambda: '{"n": 3}').sampling_parameters == (
        '{"n": 3}')
    assert jobs.read_generate_inputs(getter()[0], lambda: "").sampling_parameters is None


@pytest.mark.parametrize("stream,exclude,expected", [
    (False, None, False), (False, True, True), (True, None, True), (True, False, True)])
def test_streams_never_repeat_the_prompt(stream, exclude, expected):
    tensors = {"stream": switch(stream)}
    if exclude is not None:
        tensors["exclude_input_in_output"] = switch(exclude)
    given = jobs.read_generate_inputs(getter(**tensors)[0], lambda: None)
    assert (given.stream, given.exclude_input) == (stream, expected)


def test_every_input_read_is_one_that_auto_complete_declares():
    get, asked = getter(text_input=text("hi"))
    jobs.read_prompt(get)
    assert asked <= {i["name"] for i in io_spec.inputs_for(wire.POOLING)}
    jobs.read_wanted(get)
    jobs.read_generate_inputs(get, lambda: None)
    assert asked <= {i["name"] for i in io_spec.inputs_for(wire.GENERATE)}

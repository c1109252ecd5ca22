"""A stand-in for `triton_python_backend_utils`, the module the Python backend's stub
gives a model: just what backends/vllm/model.py uses, recording what it is sent."""

from __future__ import annotations

import json
import threading

import numpy as np

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


class Logger:
    lines: list[tuple[str, str]] = []

    @classmethod
    def _log(cls, level, message):
        cls.lines.append((level, message))

    log_info = classmethod(lambda cls, m: cls._log("info", m))
    log_warn = classmethod(lambda cls, m: cls._log("warn", m))
    log_error = classmethod(lambda cls, m: cls._log("error", m))
    log_verbose = classmethod(lambda cls, m: cls._log("verbose", m))


class TritonError:
    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE = range(5)

    def __init__(self, message: str, code: int = INTERNAL):
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class Tensor:
    def __init__(self, name: str, value: np.ndarray):
        self._name, self._value = name, value

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._value


class InferenceResponse:
    def __init__(self, output_tensors=(), error: TritonError | None = None):
        self.outputs = {t.name(): t.as_numpy() for t in output_tensors}
        self.error = error


class ResponseSender:
    def __init__(self):
        self.responses: list[InferenceResponse | None] = []
        self.cancelled = False
        self.done = threading.Event()

    def send(self, response=None, flags=0):
        self.responses.append(response)
        if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self.done.set()

    def is_cancelled(self) -> bool:
        return self.cancelled

    def wait(self, timeout=5.0) -> list[InferenceResponse | None]:
        assert self.done.wait(timeout), "no final response"
        return self.responses


class InferenceRequest:
    def __init__(self, inputs: dict[str, np.ndarray] | None = None, request_id: str = "",
                 parameters: dict | None = None):
        self.tensors = inputs or {}  # name -> value, as the test gave them
        self._id = request_id
        self._parameters = json.dumps(parameters or {})
        self.sender = ResponseSender()

    def inputs(self) -> list[Tensor]:
        """A new Tensor per input each call, as the stub makes them."""
        return [Tensor(name, value) for name, value in self.tensors.items()]

    def request_id(self) -> str:
        return self._id

    def parameters(self) -> str:
        return self._parameters

    def get_response_sender(self) -> ResponseSender:
        return self.sender


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled"))


class Metric:
    """One labelled series; records every call, as each is a round trip in the stub."""

    def __init__(self, family: MetricFamily, labels: dict, buckets: list | None):
        self.family, self.labels, self.buckets = family, labels, buckets
        self.calls: list[tuple[str, float]] = []

    def increment(self, value: float) -> None:
        assert self.family.kind == MetricFamily.COUNTER
        self.calls.append(("increment", value))

    def set(self, value: float) -> None:
        assert self.family.kind == MetricFamily.GAUGE
        self.calls.append(("set", value))

    def observe(self, value: float) -> None:
        assert self.family.kind == MetricFamily.HISTOGRAM
        self.calls.append(("observe", value))


class MetricFamily:
    COUNTER, GAUGE, HISTOGRAM = 0, 1, 2
    made: dict[str, MetricFamily] = {}  # by name, every family made

    def __init__(self, name: str, description: str, kind: int):
        self.name, self.description, self.kind = name, description, kind
        self.metrics: list[Metric] = []
        MetricFamily.made[name] = self

    def Metric(self, labels: dict, buckets: list | None = None) -> Metric:  # noqa: N802
        # Triton's own rule: buckets for a histogram, and only for one.
        if (self.kind == MetricFamily.HISTOGRAM) != (buckets is not None):
            raise ValueError("buckets are for histograms")
        metric = Metric(self, labels, buckets)
        self.metrics.append(metric)
        return metric

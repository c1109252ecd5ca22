"""Components of an image, each a small describer; compose() picks them for a plan."""
from __future__ import annotations

from ..plan import BuildPlan
from .base import Component, ContextItem, PipStep, Service, Stage, User
from .hide_keys import HideKeys
from .openai_frontend import OpenAIFrontend
from .sample_model import SampleModel
from .served_model import ServedModel
from .system import CpuSystem, GpuSystem
from .tritonserver import TritonServer
from .vllm_backend import VllmBackend
from .vllm_engine import VllmEngine

__all__ = ["compose", "Component", "ContextItem", "PipStep", "Stage", "User", "Service",
           "CpuSystem", "GpuSystem", "TritonServer", "HideKeys", "VllmEngine", "VllmBackend",
           "OpenAIFrontend", "SampleModel", "ServedModel"]


def compose(plan: BuildPlan) -> list[Component]:
    """The components of the plan's image, in the order their parts appear in it."""
    parts: list[Component] = [GpuSystem(plan) if plan.gpu else CpuSystem(plan),
                              VllmEngine(plan), TritonServer(plan), HideKeys(plan)]
    if plan.has_endpoint("openai"):
        parts.append(OpenAIFrontend(plan))
    if plan.has_backend("vllm"):
        parts += [SampleModel(plan), VllmBackend(plan)]
    if plan.serve_model.value is not None:
        parts.append(ServedModel(plan))   # last: serve needs the backend's code in place
    return parts

"""tritonbuild: Triton-style flags in, multi-stage Dockerfiles and real images out.

The stages are separate modules: flags (parse) -> validate (a BuildPlan) -> render
(Dockerfile and image files) -> context (the build directory) -> engine (BuildKit).
"""
from .cli import main
from .components import compose
from .context import BuildFiles, write_build_dir
from .engine import BuildCommand, DockerCli, Engine
from .errors import (
    BuildFailedError,
    ConflictError,
    EngineError,
    EngineUnavailableError,
    MalformedValueError,
    SourceError,
    TritonBuildError,
    UnknownValueError,
    UnsupportedError,
    UsageError,
    ValidationError,
)
from .flags import parse_flags
from .hostenv import HostFacts, discover
from .plan import Backend, BuildPlan, Secret, Sourced
from .render import Rendered, render
from .validate import make_plan

__all__ = [
    "main", "parse_flags", "make_plan", "render", "write_build_dir", "compose", "discover",
    "BuildPlan", "Sourced", "Backend", "Secret", "HostFacts", "Rendered", "BuildFiles",
    "Engine", "DockerCli", "BuildCommand",
    "TritonBuildError", "ValidationError", "UnknownValueError", "MalformedValueError",
    "ConflictError", "UnsupportedError", "UsageError", "SourceError", "EngineError",
    "EngineUnavailableError", "BuildFailedError",
]

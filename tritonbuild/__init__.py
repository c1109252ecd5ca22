"""tritonbuild: Triton-style flags in, multi-stage Dockerfiles and real images out.

The build's stages are separate modules of pipeline/: flags (parse) -> validate (a
BuildPlan) -> render (Dockerfile and image files) -> context (the build directory) ->
engine (BuildKit).  release/ runs QA and publishes after the build; tools/ holds the
commands beside it.
"""
from .cli import main
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
from .hostenv import HostFacts, discover
from .pipeline.components import compose
from .pipeline.context import BuildFiles, write_build_dir
from .pipeline.engine import BuildCommand, DockerCli, Engine
from .pipeline.flags import parse_flags
from .pipeline.plan import Backend, BuildPlan, Secret, Sourced
from .pipeline.render import Rendered, render
from .pipeline.validate import make_plan

__all__ = [
    "main", "parse_flags", "make_plan", "render", "write_build_dir", "compose", "discover",
    "BuildPlan", "Sourced", "Backend", "Secret", "HostFacts", "Rendered", "BuildFiles",
    "Engine", "DockerCli", "BuildCommand",
    "TritonBuildError", "ValidationError", "UnknownValueError", "MalformedValueError",
    "ConflictError", "UnsupportedError", "UsageError", "SourceError", "EngineError",
    "EngineUnavailableError", "BuildFailedError",
]

"""What a component is: a small describer of its part of the image.

A component never writes Dockerfile text.  It answers questions through hooks that return
lists (packages, pip steps, environment, labels, stages, files for the build context),
and render.py composes the answers of all components into the templates' input.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..plan import BuildPlan

__all__ = ["Component", "Stage", "ContextItem", "PipStep", "User", "Service"]


@dataclass(frozen=True)
class Stage:
    """A build stage: its name and the template (under dockerfiles/) that writes it."""
    name: str
    template: str


@dataclass(frozen=True)
class ContextItem:
    """A file or folder the build context must hold: from the checkout, or rendered text."""
    dest: str                       # path inside the build context
    source: Path | None = None      # file or folder to copy (hard-link where possible)
    template: str | None = None     # or a template under dockerfiles/ rendered with the plan
    text: str | None = None         # or contents made by the component
    executable: bool = False


@dataclass(frozen=True)
class PipStep:
    """One `pip install` RUN of the venv stage (one layer, so each is cached on its own)."""
    requirements: tuple[str, ...]
    why: str
    find_links: bool = False        # read wheels from the wheelhouse bind mount
    options: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class User:
    """The non-root user the image runs as."""
    name: str
    uid: int


@dataclass(frozen=True)
class Service:
    """A process the entrypoint starts beside tritonserver, and stops with it."""
    title: str                      # what the entrypoint's usage calls it
    argv: tuple[str, ...]
    why: tuple[str, ...] = ()       # comment lines above its command in the entrypoint
    takes_frontend_args: bool = False   # gets serve's frontend flags ($FRONTEND_ARGS_FILE)
    # Its exit means the server cannot serve: tritonserver is killed at once, not drained.
    gives_up_on_the_server: bool = False


class Component:
    name = "component"

    def __init__(self, plan: BuildPlan) -> None:
        self.plan = plan

    # The templates a component names (stages, project steps, context files) see it as
    # `component`, so that its own constants (paths, say) reach them without a special
    # key in the shared render context.

    # The user the image runs as: exactly one component (the system) names it.
    def user(self) -> User | None:
        return None

    # The image's ENTRYPOINT (one component, the system, names it).
    def entrypoint(self) -> list[str] | None:
        return None

    # Debian/Ubuntu packages of the final image, and of the build stages only.
    def runtime_packages(self) -> list[str]:
        return []

    def build_packages(self) -> list[str]:
        return []

    # Packages only the final image needs (installed in its own stage, so that adding one
    # does not rebuild the build stages).
    def image_packages(self) -> list[str]:
        return []

    # pip steps of the venv stage, in order; packages to remove after them.
    def pip_steps(self) -> list[PipStep]:
        return []

    def pip_uninstall(self) -> list[str]:
        return []

    # Build stages of their own (templates), in the order they should appear.
    def stages(self) -> list[Stage]:
        return []

    # Environment of the final image.
    def env(self) -> list[tuple[str, str]]:
        return []

    # Ports the final image serves.
    def ports(self) -> list[int]:
        return []

    # tritonserver's flags, as the entrypoint starts it.
    def server_args(self) -> list[str]:
        return []

    # Shared libraries the entrypoint starts tritonserver with (LD_PRELOAD), paths in the image.
    def server_preload(self) -> list[str]:
        return []

    # Processes the entrypoint starts beside tritonserver.
    def services(self) -> list[Service]:
        return []

    # The command that serves the model repository with Triton in its own process,
    # instead of tritonserver and the services: the entrypoint runs it when
    # TRITON_IN_PROCESS=1 (one component at most names it).
    def in_process_server(self) -> tuple[str, ...]:
        return ()

    # OCI labels.
    def labels(self) -> list[tuple[str, str]]:
        return []

    # Templates of final-stage steps that put the project's own code in; these run last.
    def project_steps(self) -> list[str]:
        return []

    # What this component needs in the build context.
    def context(self) -> list[ContextItem]:
        return []

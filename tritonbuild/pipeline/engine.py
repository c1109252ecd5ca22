"""The container engine behind a narrow interface: check it, say the command, run it.

DockerCli is the one implementation: BuildKit through the Docker CLI, as
`docker buildx build --load` when the buildx plugin is there, else `docker build` with
DOCKER_BUILDKIT=1 (the engine's built-in BuildKit).
"""
from __future__ import annotations

import os
import shlex
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from ..errors import BuildFailedError, EngineUnavailableError
from ..hostenv import docker_binary
from .plan import BuildPlan

__all__ = ["Engine", "DockerCli", "BuildCommand"]


class BuildCommand:
    """An argv plus the environment variables it needs, printable as a shell line."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.argv, self.env = list(argv), dict(env)

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (f"env {env} " if env else "") + " \\\n    ".join(shlex.quote(a) for a in self.argv)

    def script(self) -> str:
        return ("#!/bin/sh\n"
                "# The exact build command of this plan, as build.py runs it.  DOCKER_HOST\n"
                "# comes from the environment (scripts/start_docker.sh prints it).\n"
                "set -e\n"
                f"exec {self.shell()}\n")


class Engine(ABC):
    @abstractmethod
    def check(self) -> None:
        """Raise EngineUnavailableError when no engine answers."""

    def has_image(self, image: str) -> bool:
        """Whether the engine already holds the image (engines that cannot tell say yes)."""
        return True

    @abstractmethod
    def command(self, plan: BuildPlan, dockerfile: Path, context: Path) -> BuildCommand: ...

    @abstractmethod
    def run(self, command: BuildCommand) -> None:
        """Run the build, progress streamed; raise BuildFailedError when it fails."""


class DockerCli(Engine):
    def __init__(self, binary: str | None = None, buildx: bool | None = None) -> None:
        self.binary = binary or docker_binary()
        self._buildx = buildx

    @property
    def buildx(self) -> bool:
        if self._buildx is None:
            try:
                self._buildx = subprocess.run([self.binary, "buildx", "version"],
                                              capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                self._buildx = False
        return self._buildx

    def check(self) -> None:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        try:
            out = subprocess.run([self.binary, "version", "--format", "{{.Server.Version}}"],
                                 capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            raise EngineUnavailableError(f"no Docker client at {self.binary}") from None
        except subprocess.TimeoutExpired:
            raise EngineUnavailableError(f"the Docker engine at {where} does not answer") from None
        if out.returncode != 0 or not out.stdout.strip():
            raise EngineUnavailableError(
                f"no Docker engine answers at {where} (scripts/start_docker.sh starts one "
                f"and prints the DOCKER_HOST to export)")

    def has_image(self, image: str) -> bool:
        out = subprocess.run([self.binary, "image", "inspect", image], capture_output=True,
                             timeout=60)
        return out.returncode == 0

    def command(self, plan: BuildPlan, dockerfile: Path, context: Path) -> BuildCommand:
        argv = [self.binary] + (["buildx", "build", "--load"] if self.buildx else ["build"])
        argv += ["--quiet"] if plan.progress.value == "quiet" else [
            f"--progress={plan.progress.value}"]
        argv += [f"--file={dockerfile}", f"--tag={plan.tag.value}"]
        for secret in plan.secrets.value:
            argv.append(f"--secret=id={secret.id},src={secret.src}")
        if plan.pip_index_url.value:
            argv.append(f"--build-arg=PIP_INDEX_URL={plan.pip_index_url.value}")
        if plan.pip_extra_index_urls.value:
            argv.append("--build-arg=PIP_EXTRA_INDEX_URL="
                        + " ".join(plan.pip_extra_index_urls.value))
        if plan.no_cache.value:
            argv.append("--no-cache")
        argv.append(str(context))
        return BuildCommand(argv, {} if self.buildx else {"DOCKER_BUILDKIT": "1"})

    def run(self, command: BuildCommand) -> None:
        # Inherited stdout/stderr: BuildKit's progress streams straight to the user.
        rc = subprocess.call(command.argv, env={**os.environ, **command.env})
        if rc != 0:
            raise BuildFailedError(rc, command.shell().replace(" \\\n    ", " "))

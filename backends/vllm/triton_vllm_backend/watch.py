"""Watch tritonserver's vLLM models from beside it, and give up when serving cannot recover.

    python3 -m triton_vllm_backend.watch [--url URL] [--start-timeout S]
    python3 -m triton_vllm_backend.watch --once [--url URL] [--timeout S]

The image's entrypoint runs the first form beside tritonserver.  It waits for the server
to become ready (at most --start-timeout seconds: a start that wedges, as the Python
backend's stub launch can, must end in a restart, not a container that never serves),
then asks every ready vLLM model for its health every --interval seconds (stub/health.py:
one request that generates nothing and travels the path a generation takes).  When a model's
engine or stub is dead it says which, and exits non-zero; the entrypoint then stops the
server, and the container exits for `docker run --restart` or Kubernetes to restart it.

The second form asks once and exits 1 when Triton cannot be reached or a model answers
that it is dead: a liveness probe that sees model health, not only tritonserver's process.

Both send the keys that the image's tritonserver asks for (access.py): the model-control
key with the repository index, the API key, when there is one, with each health check.

A busy model is not a dead one: only an answer that says so (an error of kind
`engine_dead` from the model, Triton's "not healthy" for a dead stub) counts at once;
timeouts and other failures must repeat --failures times in a row.  So does a stub
process that is gone while its model is still READY: the watch looks for the stubs among
the processes it can see (the container's), because Triton notices a dead stub only when
it next sends it a request, and then fails the requests queued for it one a second, the
health check among them.

Only the standard library (stub/wire.py is too): it starts in a moment, next to a server
that is loading.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .access import MODEL_CONTROL_KEY_ENV, Keys
from .stub.wire import ENGINE_DEAD, HEALTH_PARAMETER, STUB_NOT_HEALTHY, kind_of

# Exit statuses (the container's, through the entrypoint).
START_TIMED_OUT = 3
MODEL_DEAD = 4

DEFAULT_URL = "http://127.0.0.1:8000"
# Time to ready: the model's download, load and compile (a large model on a GPU: minutes).
START_TIMEOUT_ENV = "START_TIMEOUT_SECONDS"
DEFAULT_START_TIMEOUT_S = 1800.0


@dataclass
class Answer:
    healthy: bool
    dead: bool          # the answer itself says the model cannot serve (no retry helps)
    why: str = ""


def _request(url: str, body: dict | None, timeout: float,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    headers = {**({"Content-Type": "application/json"} if data else {}), **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _error_text(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error") or body.decode(errors="replace") or "no body")
    except (ValueError, AttributeError):
        return body.decode(errors="replace")


def classify(status: int, body: bytes) -> Answer:
    """A health request's answer, as the watch reads it."""
    message = _error_text(body) if status != 200 or b'"error"' in body else ""
    if status == 200 and not message:
        return Answer(True, False)
    # 503: UNAVAILABLE, where Triton keeps the code.  Its generate endpoint answers a
    # model's error with a 400 whatever its code, so the kind that leads the text counts
    # too: it tells a dead engine (stub/health.py) from a model that is unavailable for a
    # while (unloading).  A dead stub is answered by Triton's Python backend itself, in
    # words: "Stub process '...' is not healthy."
    dead = (status == 503 or kind_of(message) == ENGINE_DEAD
            or STUB_NOT_HEALTHY in message)
    return Answer(False, dead, f"HTTP {status}: {message}")


class Server:
    def __init__(self, url: str, timeout: float, keys: Keys | None = None):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.keys = keys or Keys()
        self._backends: dict[str, str] = {}

    def ready(self) -> bool:
        try:
            return _request(f"{self.url}/v2/health/ready", None, self.timeout)[0] == 200
        except OSError:
            return False

    def vllm_models(self) -> list[str]:
        """The ready models that the vLLM backend serves."""
        status, body = _request(f"{self.url}/v2/repository/index", {"ready": True},
                                self.timeout, self.keys.repository_headers())
        if status == 403:  # restricted: no key, or another one than the server's
            raise OSError(f"the repository index answered HTTP 403: {_error_text(body)} "
                          f"(set ${MODEL_CONTROL_KEY_ENV} to the server's key)")
        if status != 200:
            raise OSError(f"the repository index answered HTTP {status}")
        names = sorted({m["name"] for m in json.loads(body) if m.get("state") == "READY"})
        return [name for name in names if self._backend(name) == "vllm"]

    def _backend(self, name: str) -> str:
        if name not in self._backends:
            status, body = _request(f"{self.url}/v2/models/{quote(name)}/config", None,
                                    self.timeout)
            if status != 200:
                return ""  # unloading meanwhile: asked again next time
            self._backends[name] = json.loads(body).get("backend", "")
        return self._backends[name]

    def health(self, name: str) -> Answer:
        try:
            return classify(*_request(f"{self.url}/v2/models/{quote(name)}/generate",
                                      {"parameters": {HEALTH_PARAMETER: True}}, self.timeout,
                                      self.keys.inference_headers()))
        except OSError as err:  # refused, reset, timed out
            return Answer(False, False, f"no answer: {err}")


STUB = b"triton_python_backend_stub"


def model_of_stub(argv: list[bytes]) -> str:
    """The model a stub serves, from its command line: the Python backend starts it with
    MODEL_REPOSITORY/MODEL/VERSION/model.py first."""
    parts = Path(argv[1].decode(errors="replace")).parts if len(argv) > 1 else ()
    return parts[-3] if len(parts) >= 3 else ""


class StubProcesses:
    """The Python backend's stub processes among those this watch can see."""

    def __init__(self, proc: str | Path = "/proc"):
        self.proc = Path(proc)
        self._alive: dict[int, str] = {}  # pid -> model, as the last look found them

    def _look(self) -> dict[int, str]:
        found = {}
        try:
            entries = list(os.scandir(self.proc))
        except OSError:
            return found
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                # A killed stub that its parent has not reaped yet (a zombie) has an
                # empty command line: it counts as gone.
                argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:  # it ended while we looked
                continue
            if os.path.basename(argv[0]) == STUB:
                found[int(entry.name)] = model_of_stub(argv)
        return found

    def gone(self) -> dict[int, str]:
        """The stubs (pid -> model) seen at the last look that are not alive now."""
        alive = self._look()
        gone = {pid: model for pid, model in self._alive.items() if pid not in alive}
        self._alive = alive
        return gone

    def serving(self) -> set[str]:
        """The models with a stub alive at the last look."""
        return set(self._alive.values())


def wait_until_ready(server: Server, start_timeout: float, interval: float,
                     clock=time.monotonic, sleep=time.sleep) -> bool:
    deadline = clock() + start_timeout
    while not server.ready():
        if clock() >= deadline:
            return False
        sleep(interval)
    return True


def watch(server: Server, interval: float, failures: int, log, sleep=time.sleep,
          stubs: StubProcesses | None = None) -> int:
    """Runs until a model is dead; returns MODEL_DEAD."""
    stubs = stubs or StubProcesses()
    misses: dict[str, int] = {}
    gone: dict[int, str] = {}  # stubs gone, until a listing of the models says whose
    while True:
        # Looked at before the models are listed: a model being unloaded, whose stub
        # stops, is no longer READY by then.  A model reloaded in place keeps a stub (the
        # new one starts before the old one stops); so does one of several instances
        # whose stub died, which the health check finds instead.
        gone.update(stubs.gone())
        try:
            models = server.vllm_models()
        except OSError as err:
            log(f"watch: cannot list the models ({err}); trying again")
            models = list(misses)
        else:
            serving = stubs.serving()
            for pid, name in gone.items():
                if name in models and name not in serving:
                    log(f"watch: model '{name}' cannot serve (its stub process {pid} "
                        f"died); stopping the server so that it is restarted")
                    return MODEL_DEAD
            gone.clear()
        for name in models:
            answer = server.health(name)
            if answer.healthy:
                misses.pop(name, None)
                continue
            misses[name] = misses.get(name, 0) + 1
            if answer.dead or misses[name] >= failures:
                log(f"watch: model '{name}' cannot serve ({answer.why}); stopping the "
                    f"server so that it is restarted")
                return MODEL_DEAD
            log(f"watch: model '{name}' did not answer its health check "
                f"({misses[name]} of {failures}): {answer.why}")
        sleep(interval)


def check_once(server: Server, log) -> int:
    """A liveness probe's answer: 1 when Triton cannot be reached or a model says it is
    dead.  A check that merely goes unanswered passes: a busy server is alive, and a
    wedged one is the watch's to find (it counts misses in a row)."""
    try:
        models = server.vllm_models()
    except OSError as err:
        log(f"watch: cannot list the models: {err}")
        return 1
    status = 0
    for name in models:
        answer = server.health(name)
        if not answer.healthy:
            log(f"watch: model '{name}': {answer.why}")
            status = 1 if answer.dead else status
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m triton_vllm_backend.watch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="tritonserver's HTTP endpoint")
    parser.add_argument("--once", action="store_true",
                        help="ask every ready vLLM model once; exit 1 when one is dead")
    parser.add_argument("--start-timeout", type=float,
                        default=os.environ.get(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S),
                        help=f"seconds the server may take to become ready (default "
                             f"${START_TIMEOUT_ENV}, else {DEFAULT_START_TIMEOUT_S:g})")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds between health checks (default 0.5)")
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="seconds a health check may take (default 5)")
    parser.add_argument("--failures", type=int, default=3,
                        help="unanswered checks in a row that count as dead (default 3)")
    args = parser.parse_args(argv)
    for name in ("start_timeout", "interval", "timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.failures < 1:
        parser.error("--failures must be at least 1")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    server = Server(args.url, args.timeout, Keys.from_environment())
    if args.once:
        return check_once(server, log)
    if not wait_until_ready(server, args.start_timeout, args.interval):
        log(f"watch: tritonserver was not ready within {args.start_timeout:g} s "
            f"(--start-timeout); stopping it so that it is restarted")
        return START_TIMED_OUT
    return watch(server, args.interval, args.failures, log)


def _stop(_signum, _frame):
    # The entrypoint stops the watch with the rest: being stopped is not a failure.
    sys.exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    sys.exit(main())

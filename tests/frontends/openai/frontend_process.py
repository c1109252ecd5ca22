"""A real `triton-openai` process over the fake Triton (drain_server.py), for the tests
of how its server treats connections and signals."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).parent


class Frontend:
    def __init__(self, tmp_path: Path, delay: float, grace: float, *args: str):
        from qa.common import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.log_path = tmp_path / "frontend.log"
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "drain_server.py"), str(self.port), str(delay),
             str(grace), *args], stdout=self.log_path.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, self.log
            time.sleep(0.05)
        raise AssertionError(f"not ready:\n{self.log}")

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

"""A real `triton-openai` process over the fake Triton (drain_server.py), for the tests
of how its server treats connections and signals."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent


class Frontend:
    def __init__(self, tmp_path: Path, delay: float, grace: float, *args: str):
        from qa.common import ServedProcess, free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        tmp_path.mkdir(parents=True, exist_ok=True)
        self._served = ServedProcess.host(
            "triton-openai", [sys.executable, str(HERE / "drain_server.py"), str(self.port),
                              str(delay), str(grace), *args],
            ports={"http": self.port}, log_path=tmp_path / "frontend.log")
        self.proc = self._served.proc
        try:
            self._served.wait_http("http", "/health/ready", timeout=30, interval=0.05)
        except BaseException:
            self.stop()
            raise

    @property
    def log(self) -> str:
        return self._served.log

    def stop(self) -> None:
        # The tests stop it themselves when they mean to; what is left is only killed.
        self._served.stop(timeout=0)

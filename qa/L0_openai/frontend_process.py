"""Start the `triton-openai` command as a real server process on a free port."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from qa.common import ServedProcess, free_port


def frontend_command() -> list[str]:
    """The installed console script of the environment running the tests."""
    script = Path(sys.executable).parent / "triton-openai"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "triton_openai"]


class FrontendProcess:
    def __init__(self, triton_url: str, *args: str, metrics_url: str | None = None,
                 env: dict[str, str] | None = None, timeout: float = 120.0, wait_ready=True):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [*frontend_command(), "--triton-url", triton_url, "--host", "127.0.0.1",
               "--port", str(self.port), "--triton-metrics-url", metrics_url or "", *args]
        self._served = ServedProcess.host("triton-openai", cmd, ports={"http": self.port},
                                          env={**os.environ, **(env or {})})
        self.proc = self._served.proc
        try:
            self._served.wait_http("http", "/health/ready" if wait_ready else "/health/live",
                                   timeout=timeout, interval=0.2)
        except BaseException:
            self.stop()
            raise

    @property
    def log(self) -> str:
        return self._served.log

    def stop(self, timeout: float = 30.0) -> int | None:
        self._served.stop(timeout)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

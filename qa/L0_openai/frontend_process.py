"""Start the `triton-openai` command as a real server process on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from qa.common import ServerError, free_port


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
        self._log = tempfile.NamedTemporaryFile(prefix="triton-openai-", suffix=".log", delete=False)
        cmd = [*frontend_command(), "--triton-url", triton_url, "--host", "127.0.0.1",
               "--port", str(self.port), "--triton-metrics-url", metrics_url or "", *args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        try:
            self._wait("/health/ready" if wait_ready else "/health/live", timeout)
        except BaseException:
            self.stop()
            raise

    def _wait(self, path: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"triton-openai exited ({self.proc.returncode}):\n{self.log}")
            try:
                with urllib.request.urlopen(self.url + path, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise ServerError(f"triton-openai not ready after {timeout:.0f} s:\n{self.log}")

    @property
    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        os.unlink(self._log.name)

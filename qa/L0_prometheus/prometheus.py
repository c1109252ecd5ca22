"""Debian's real Prometheus on loopback, scraping a container of the image, and a client
of its HTTP API.

    with Prometheus(tmp, targets) as prom:
        prom.query('sum(rate(vllm:generation_tokens_total[1m]))')
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import httpx
import yaml

from qa.common import free_port


class PrometheusError(RuntimeError):
    """Prometheus did not start, or refused a query; the message says why."""


class Prometheus:
    """A Prometheus scraping `jobs`: {job name: (host:port, labels, keep regex or None)}.

    `keep` drops every series whose name does not match (the frontend's /metrics appends
    Triton's page: kept whole, every vLLM series would count twice)."""

    def __init__(self, workdir: Path, jobs: dict[str, tuple[str, dict, str | None]],
                 interval: str = "1s"):
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusError("prometheus is missing: scripts/setup_host.sh installs "
                                  "Debian's prometheus package")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        scrape = []
        for job, (target, labels, keep) in jobs.items():
            config = {"job_name": job, "scrape_interval": interval,
                      "static_configs": [{"targets": [target], "labels": labels}]}
            if keep:
                config["metric_relabel_configs"] = [
                    {"source_labels": ["__name__"], "regex": keep, "action": "keep"}]
            scrape.append(config)
        workdir.mkdir(parents=True, exist_ok=True)
        config_file = workdir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump({"global": {"evaluation_interval": interval},
                                               "scrape_configs": scrape}))
        self._log = open(workdir / "prometheus.log", "wb")
        self.log_path = workdir / "prometheus.log"
        # In the caller's session (a process group of its own is enough to stop it).
        self._proc = subprocess.Popen(
            [binary, f"--config.file={config_file}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=subprocess.STDOUT, process_group=0)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise PrometheusError(f"prometheus exited: {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise PrometheusError(f"prometheus not ready in {timeout} s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def query(self, expr: str) -> list[dict]:
        """The instant vector `expr` evaluates to now: [{"metric": labels, "value": float}]."""
        resp = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=30)
        body = resp.json()
        if body.get("status") != "success":
            raise PrometheusError(f"{expr}: {body.get('errorType')}: {body.get('error')}")
        if body["data"]["resultType"] != "vector":
            raise PrometheusError(f"{expr}: a {body['data']['resultType']}, not a vector")
        return [{"metric": r["metric"], "value": float(r["value"][1])}
                for r in body["data"]["result"]]

    def targets_up(self) -> dict[str, str]:
        """job -> health of its target."""
        body = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()
        return {t["labels"]["job"]: t["health"] for t in body["data"]["activeTargets"]}

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

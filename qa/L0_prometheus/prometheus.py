"""Debian's real Prometheus on loopback, scraping a container of the image, and a client
of its HTTP API.

    with Prometheus(tmp, targets) as prom:
        prom.query('sum(rate(vllm:generation_tokens_total[1m]))')
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import yaml

from qa.common import ServedProcess, ServerError, free_port


class PrometheusError(RuntimeError):
    """Prometheus did not start, or refused a query; the message says why."""


class Prometheus:
    """A Prometheus scraping `jobs`: {job name: (host:port, labels, keep regex or None)}.

    `keep` drops every series whose name does not match (the frontend's /metrics appends
    Triton's page: kept whole, every vLLM series would count twice); `relabel` adds a
    job's own metric_relabel_configs."""

    def __init__(self, workdir: Path, jobs: dict[str, tuple[str, dict, str | None]],
                 interval: str = "1s", relabel: dict[str, list[dict]] | None = None):
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
            rules = list((relabel or {}).get(job, []))
            if keep:
                rules.append({"source_labels": ["__name__"], "regex": keep, "action": "keep"})
            if rules:
                config["metric_relabel_configs"] = rules
            scrape.append(config)
        workdir.mkdir(parents=True, exist_ok=True)
        config_file = workdir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump({"global": {"evaluation_interval": interval},
                                               "scrape_configs": scrape}))
        self._server = ServedProcess.host(
            "prometheus",
            [binary, f"--config.file={config_file}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            ports={"http": self.port}, log_path=workdir / "prometheus.log", own_group=True)
        try:
            self._server.wait_http("http", "/-/ready", timeout=60, interval=0.3)
        except ServerError as e:
            self.stop()
            raise PrometheusError(str(e)) from None

    def log_tail(self, chars: int = 3000) -> str:
        return self._server.log[-chars:]

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
        self._server.stop(timeout=20)

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

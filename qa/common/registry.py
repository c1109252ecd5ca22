"""A real OCI registry on loopback for tests: Debian's `docker-registry` (distribution
2.8), with htpasswd authentication, on a free port, its storage in a temporary folder.

    with LocalRegistry() as reg:                  # reg.address = "127.0.0.1:PORT"
        reg.docker_config(tmp / "cfg")            # a DOCKER_CONFIG that logs in as reg.user
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from qa.common.http_calls import fetch_json, http_status
from qa.common.served import ServedProcess, free_port

REGISTRY_BINARY = "/usr/bin/docker-registry"


class LocalRegistry:
    user, password = "publisher", "s3cret-for-tests"

    def __init__(self) -> None:
        for tool in (REGISTRY_BINARY, "htpasswd", "skopeo"):
            if not shutil.which(tool):
                raise RuntimeError(f"{tool} is missing: scripts/setup_host.sh installs it")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._tmp = Path(tempfile.mkdtemp(prefix="registry-"))
        htpasswd = subprocess.run(["htpasswd", "-Bbn", self.user, self.password],
                                  capture_output=True, text=True, check=True).stdout
        (self._tmp / "htpasswd").write_text(htpasswd)
        (self._tmp / "config.yml").write_text(json.dumps({  # YAML is a superset of JSON
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(self._tmp / "data")},
                        "delete": {"enabled": True}},
            "http": {"addr": self.address},
            "auth": {"htpasswd": {"realm": "tests", "path": str(self._tmp / "htpasswd")}},
        }))
        self._server = ServedProcess.host(
            "docker-registry", [REGISTRY_BINARY, "serve", str(self._tmp / "config.yml")],
            ports={"http": self.port}, log_path=self._tmp / "registry.log")
        try:  # up, and asking for credentials
            self._server.wait_http("http", "/v2/", status=401, timeout=30, interval=0.2)
        except BaseException:
            self.stop()
            raise

    def _login(self, password: str) -> dict[str, str]:
        token = base64.b64encode(f"{self.user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def status(self, path: str, password: str | None = None) -> int:
        """The status of a GET of `path`, as a client with `password` (or none) gets it."""
        headers = self._login(password) if password is not None else None
        return http_status(f"http://{self.address}{path}", timeout=5, headers=headers)

    def get_json(self, path: str) -> dict:
        """The answer to a GET of `path` as the registry's user."""
        return fetch_json(f"http://{self.address}{path}", headers=self._login(self.password),
                          timeout=10)

    def docker_config(self, folder: Path, password: str | None = None) -> Path:
        """A Docker config folder holding credentials for this registry, as `docker login`
        writes them (the password given, or the right one)."""
        folder.mkdir(parents=True, exist_ok=True)
        auth = base64.b64encode(f"{self.user}:{password or self.password}".encode()).decode()
        (folder / "config.json").write_text(json.dumps({"auths": {self.address: {"auth": auth}}}))
        return folder

    def stop(self) -> None:
        self._server.stop(timeout=10)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LocalRegistry:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

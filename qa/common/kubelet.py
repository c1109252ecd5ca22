"""Run a rendered Kubernetes pod's container with Docker, and probe it as the kubelet would.

There is no cluster here, so this is the part of a kubelet a chart's pod depends on:
the container's command, args, env (values and Secret/ConfigMap references resolved from
the rendered manifests), ports, security context (user, group, read-only root filesystem,
capabilities, no privilege escalation), volumes (emptyDir as a fresh writable folder,
memory-backed /dev/shm as the shm size, ConfigMap and Secret files), the memory limit,
and DNS: each rendered Service that selects the pod becomes a network alias, so other
containers reach it by the Service's name, as in a cluster.

    pod = PodContainer(manifests, pod_template, "triton", network=net, workdir=tmp, name=n)
    pod.start()
    Probe(pod, pod.container["startupProbe"]).check()

Anything the conversion does not know (a PVC, a hostPath, a fieldRef) is an error, not a
silent skip: the conformance run must not pass for a pod it did not really run.
"""

from __future__ import annotations

import base64
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from qa.common.docker import LEAST_CPU_WEIGHT, docker
from qa.common.served import free_port

_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


class PodError(RuntimeError):
    """The pod spec asks for something this runner cannot do.  (A `docker` command that
    fails is qa.common.docker's AssertionError.)"""


def quantity_bytes(value) -> int:
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    if not match or match.group(2) not in _UNITS:
        raise PodError(f"unsupported quantity {value!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class PodContainer:
    """One container of a rendered pod template, run with `docker run`.

    manifests: everything the chart rendered (Secrets, ConfigMaps, Services are read).
    template: a pod template ({"metadata": ..., "spec": ...}) or a Pod manifest.
    """

    def __init__(self, manifests: list[dict], template: dict, container: str, *,
                 network: str, workdir: Path, name: str,
                 injected_env: dict[str, str] | None = None, hostnames: tuple[str, ...] = ()):
        self.manifests = manifests
        # What a controller's webhook adds to the pod (LeaderWorkerSet's LWS_* variables),
        # and the DNS names it gives the pod (a headless Service's pod names).
        self.injected_env = dict(injected_env or {})
        self.hostnames = hostnames
        self.labels = template["metadata"].get("labels") or {}
        self.spec = template["spec"]
        self.container = next(c for c in self.spec["containers"] if c["name"] == container)
        self.network = network
        self.workdir = workdir
        self.name = name
        self.ports: dict[int, int] = {}  # containerPort -> loopback port on this host
        self.cid: str | None = None

    # ------------------------------------------------------------ resolution
    def _object(self, kind: str, name: str) -> dict:
        for m in self.manifests:
            if m["kind"] == kind and m["metadata"]["name"] == name:
                return m
        raise PodError(f"the pod refers to {kind} {name}, which the chart did not render")

    def _secret_value(self, ref: dict) -> str:
        secret = self._object("Secret", ref["name"])
        if "stringData" in secret and ref["key"] in secret["stringData"]:
            return secret["stringData"][ref["key"]]
        return base64.b64decode(secret["data"][ref["key"]]).decode()

    def _env(self) -> list[str]:
        out = []
        for var in self.container.get("env") or []:
            if "value" in var:
                value = str(var["value"])
            elif "secretKeyRef" in var.get("valueFrom", {}):
                value = self._secret_value(var["valueFrom"]["secretKeyRef"])
            elif "configMapKeyRef" in var.get("valueFrom", {}):
                ref = var["valueFrom"]["configMapKeyRef"]
                value = self._object("ConfigMap", ref["name"])["data"][ref["key"]]
            else:
                raise PodError(f"env {var['name']}: unsupported source {var}")
            out += ["-e", f"{var['name']}={value}"]
        if self.container.get("envFrom"):
            raise PodError("envFrom is not supported by this runner")
        for name, value in self.injected_env.items():
            out += ["-e", f"{name}={value}"]
        return out

    def _security(self) -> list[str]:
        pod = self.spec.get("securityContext") or {}
        ctx = {**pod, **(self.container.get("securityContext") or {})}
        args = []
        uid, gid = ctx.get("runAsUser"), ctx.get("runAsGroup")
        if uid is not None:
            args += ["--user", f"{uid}:{gid if gid is not None else uid}"]
        if ctx.get("runAsNonRoot"):
            if uid in (None, 0):
                user = docker("image", "inspect", "-f", "{{.Config.User}}",
                              self.container["image"]).stdout.strip()
                if uid == 0 or user.split(":")[0] in ("", "0", "root"):
                    raise PodError("runAsNonRoot, but the container would run as root")
        if pod.get("fsGroup") is not None:
            args += ["--group-add", str(pod["fsGroup"])]
        if ctx.get("readOnlyRootFilesystem"):
            args.append("--read-only")
        if ctx.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        caps = ctx.get("capabilities") or {}
        args += [a for cap in caps.get("drop") or [] for a in ("--cap-drop", cap)]
        args += [a for cap in caps.get("add") or [] for a in ("--cap-add", cap)]
        if ctx.get("privileged"):
            raise PodError("privileged containers are not supported by this runner")
        return args

    def _volumes(self) -> list[str]:
        volumes = {v["name"]: v for v in self.spec.get("volumes") or []}
        args = []
        for mount in self.container.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            path = mount["mountPath"]
            ro = ":ro" if mount.get("readOnly") else ""
            if "subPath" in mount:
                raise PodError(f"{path}: subPath is not supported by this runner")
            if "emptyDir" in volume:
                empty = volume["emptyDir"] or {}
                if empty.get("medium") == "Memory":
                    size = quantity_bytes(empty.get("sizeLimit", "64Mi"))
                    if path == "/dev/shm":
                        args.append(f"--shm-size={size}")
                    else:
                        args += ["--tmpfs", f"{path}:rw,exec,size={size}"]
                    continue
                # On the node's disk, empty, writable by any user (as the kubelet makes it).
                host = self.workdir / f"{self.name}-{mount['name']}"
                host.mkdir(parents=True, exist_ok=True)
                host.chmod(0o777)
                args += ["-v", f"{host}:{path}{ro}"]
            elif "configMap" in volume or "secret" in volume:
                host = self._files(volume)
                args += ["-v", f"{host}:{path}:ro"]
            else:
                raise PodError(f"volume {mount['name']}: only emptyDir, configMap and secret "
                               f"are supported by this runner, got {sorted(volume)}")
        return args

    def _files(self, volume: dict) -> Path:
        """A ConfigMap's or Secret's keys as files, honoring `items` paths."""
        if "configMap" in volume:
            src = volume["configMap"]
            data = dict(self._object("ConfigMap", src["name"]).get("data") or {})
        else:
            src = volume["secret"]
            secret = self._object("Secret", src["secretName"])
            data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
            data.update(secret.get("stringData") or {})
        items = src.get("items") or [{"key": k, "path": k} for k in data]
        host = self.workdir / f"{self.name}-{volume['name']}"
        # The kubelet's layout: the files in a hidden timestamped folder, `..data` linking
        # to it, and each top-level name a link through `..data` (so that an update swaps
        # one link); a server scanning the mount sees the hidden entries too.
        payload = host / "..2026_01_01_00_00_00.000000000"
        for item in items:
            target = payload / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data[item["key"]])
        (host / "..data").symlink_to(payload.name)
        for top in {Path(item["path"]).parts[0] for item in items}:
            (host / top).symlink_to(f"..data/{top}")
        for p in [host, *host.rglob("*")]:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        return host

    def _aliases(self) -> list[str]:
        """The names of the Services that select this pod, with their ports checked."""
        names = []
        ports = {p.get("name"): p["containerPort"] for p in self.container.get("ports") or []}
        for svc in self.manifests:
            if svc["kind"] != "Service" or not _matches(svc["spec"].get("selector"), self.labels):
                continue
            for port in svc["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                number = ports.get(target, target)
                if number != port["port"]:
                    raise PodError(f"Service {svc['metadata']['name']} maps port {port['port']} "
                                   f"to {number}: a network alias cannot remap ports")
            names.append(svc["metadata"]["name"])
        return names

    # ------------------------------------------------------------ life cycle
    def docker_args(self) -> list[str]:
        c = self.container
        args = ["run", "-d", "--name", self.name, "--network", self.network,
                LEAST_CPU_WEIGHT]
        for alias in [*self._aliases(), *self.hostnames]:
            args += ["--network-alias", alias]
        for port in c.get("ports") or []:
            host = free_port()
            self.ports[port["containerPort"]] = host
            args += ["-p", f"127.0.0.1:{host}:{port['containerPort']}"]
        limits = (c.get("resources") or {}).get("limits") or {}
        if "memory" in limits:
            args.append(f"--memory={quantity_bytes(limits['memory'])}")
        args += self._security() + self._volumes() + self._env()
        command = c.get("command") or []
        if command:
            args += ["--entrypoint", command[0]]
        args.append(c["image"])
        return args + command[1:] + [str(a) for a in c.get("args") or []]

    def start(self) -> None:
        self.cid = docker(*self.docker_args()).stdout.strip()

    def run_to_completion(self, timeout: float) -> tuple[int, str]:
        """Start, wait for the exit (a Pod with restartPolicy Never); (status, log)."""
        self.start()
        status = self.wait_exit(timeout)
        return (124 if status is None else status), self.logs()

    def wait_exit(self, timeout: float) -> int | None:
        """Wait up to `timeout` seconds for the container to exit: its status, or None
        while it still runs."""
        try:
            return int(docker("wait", self.cid, timeout=timeout).stdout.strip())
        except subprocess.TimeoutExpired:
            return None

    def running(self) -> bool:
        out = docker("inspect", "-f", "{{.State.Running}}", self.cid, check=False)
        return out.stdout.strip() == "true"

    def logs(self, tail: int = 60) -> str:
        out = docker("logs", "--tail", str(tail), self.cid, check=False)
        return out.stdout + out.stderr

    def kill(self) -> None:
        """The pod's sudden end (its node lost, the OOM killer): SIGKILL, no grace."""
        docker("kill", self.cid)

    def remove(self) -> None:
        if self.cid:
            docker("rm", "-f", self.cid, check=False)
            self.cid = None

    def port_of(self, port) -> int:
        """The loopback port on this host of a container port (number or name)."""
        if isinstance(port, str):
            named = {p.get("name"): p["containerPort"] for p in self.container["ports"]}
            port = named[port]
        return self.ports[port]


def leader_worker_set_env(lws: dict, group: int, worker: int, namespace: str = "default"
                          ) -> dict[str, str]:
    """The variables LeaderWorkerSet's webhook puts in each pod of group `group` (worker 0 is
    the leader): the leader's address is its pod name under the set's headless Service."""
    name = lws["metadata"]["name"]
    return {"LWS_LEADER_ADDRESS": f"{name}-{group}.{name}.{namespace}",
            "LWS_GROUP_SIZE": str(lws["spec"]["leaderWorkerTemplate"]["size"]),
            "LWS_WORKER_INDEX": str(worker)}


# What the kubelet sends with an httpGet probe unless the probe's httpHeaders say otherwise.
KUBELET_HEADERS = {"User-Agent": "kube-probe/1.37", "Accept": "*/*"}


class Probe:
    """A rendered probe (httpGet, exec or tcpSocket), run as the kubelet runs it."""

    def __init__(self, pod: PodContainer, spec: dict):
        self.pod = pod
        self.spec = spec
        self.period = spec.get("periodSeconds", 10)
        self.timeout = spec.get("timeoutSeconds", 1)
        self.failure_threshold = spec.get("failureThreshold", 3)
        self.initial_delay = spec.get("initialDelaySeconds", 0)

    @property
    def budget(self) -> float:
        """Seconds of consecutive failures after which the kubelet acts (restart, unready)."""
        return self.initial_delay + self.period * self.failure_threshold

    def check(self) -> tuple[bool, str]:
        """One attempt: (success, why)."""
        if "httpGet" in self.spec:
            get = self.spec["httpGet"]
            if "host" in get:
                raise PodError("httpGet.host is not supported by this runner (the pod's own "
                               "address is probed)")
            scheme = get.get("scheme", "HTTP").lower()
            # The path as written, its query included: the kubelet sends both.
            url = f"{scheme}://127.0.0.1:{self.pod.port_of(get['port'])}{get.get('path', '/')}"
            headers = {**KUBELET_HEADERS,
                       **{h["name"]: h["value"] for h in get.get("httpHeaders") or []}}
            try:
                req = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return 200 <= resp.status < 400, f"HTTP {resp.status}"
            except urllib.error.HTTPError as err:
                return False, f"HTTP {err.code}"
            except OSError as err:
                return False, str(err)
        if "exec" in self.spec:
            try:
                out = docker("exec", self.pod.cid, *self.spec["exec"]["command"], check=False,
                             timeout=self.timeout + 5)
            except subprocess.TimeoutExpired:
                return False, f"timed out after {self.timeout} s"
            return out.returncode == 0, (out.stdout + out.stderr).strip()[-300:]
        if "tcpSocket" in self.spec:
            port = self.pod.port_of(self.spec["tcpSocket"]["port"])
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=self.timeout):
                    return True, "connected"
            except OSError as err:
                return False, str(err)
        raise PodError(f"unsupported probe {sorted(self.spec)}")

    def timed_check(self) -> tuple[bool, str, float]:
        start = time.monotonic()
        ok, why = self.check()
        return ok, why, time.monotonic() - start

"""What the image is made of: its user, its layers and history (no build secret), its
labels (every pin), its size (within the budget in versions.toml)."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile
from pathlib import PurePosixPath

import pytest

from qa.common.docker import DOCKER
from qa.common.figures import record
from qa.L0_image.conftest import docker
from tritonbuild import pins
from tritonbuild.hostenv import discover
from tritonbuild.pipeline.components.hide_keys import LIBRARY

pytestmark = pytest.mark.docker

LABEL_PREFIX = "io.triton-vllm.version."
# Files that hold credentials or pip's settings (an index URL with a token, a cert path)
# and must never be baked into a layer.
SECRET_NAMES = {".netrc", "_netrc", "pip.conf", "pip.ini", ".pypirc", ".git-credentials"}
# Debian's ca-certificates writes the system bundle here; a copy of the host's bundle
# anywhere else is the build secret leaking.
SYSTEM_BUNDLE_DIR = "etc/ssl/certs/"
CREDENTIAL_URL = re.compile(r"https?://[^/\s:@]+:[^/\s@]+@")


# The image's own tritonserver, started as the entrypoint starts it (the library that hides
# restricted-API keys preloaded) with the key in $1, on an empty repository; once it
# answers, its command line as /proc shows it, one argument a line.
SHOW_TRITONSERVER_ARGV = rf"""
mkdir -p /tmp/empty-repository
LD_PRELOAD={LIBRARY} tritonserver --model-repository=/tmp/empty-repository \
    --model-control-mode=explicit --allow-grpc=false --allow-metrics=false \
    --http-restricted-api="model-repository:k=$1" > /dev/null 2>&1 &
pid=$!
until python3 -c 'import urllib.request as r; r.urlopen("http://127.0.0.1:8000/v2/health/live")' \
        2>/dev/null; do
    kill -0 "$pid" || exit 1
    sleep 0.5
done
tr '\0' '\n' < "/proc/$pid/cmdline"
kill "$pid"
"""


def test_tritonserver_runs_with_its_keys_hidden(image):
    key = "key-that-must-not-show-2718"
    out = docker("run", "--rm", "--entrypoint", "/bin/bash", image,
                 "-c", SHOW_TRITONSERVER_ARGV, "show", key)
    assert f"--http-restricted-api=model-repository:k={'*' * len(key)}" in out.stdout.split()
    assert key not in out.stdout


def test_runs_as_non_root(image, inspect):
    user = inspect["Config"]["User"]
    assert user.isdigit() and int(user) != 0, f"image user {user!r}: numeric and non-root"
    uid = docker("run", "--rm", "--entrypoint", "id", image, "-u").stdout.strip()
    assert uid == user


def _secret_fingerprints() -> dict[int, set[str]]:
    """size -> sha256 of the build secrets this host hands builds (pip's CA bundle)."""
    out: dict[int, set[str]] = {}
    cert = discover().pip_cert
    if cert is not None and cert.is_file():
        data = cert.read_bytes()
        out.setdefault(len(data), set()).add(hashlib.sha256(data).hexdigest())
    return out


def test_no_secret_in_any_layer(image):
    secrets = _secret_fingerprints()
    found: list[str] = []
    layers = 0
    save = subprocess.Popen([DOCKER, "save", image], stdout=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=save.stdout, mode="r|") as archive:
            for entry in archive:
                if not entry.name.endswith("layer.tar"):
                    continue
                layers += 1
                with tarfile.open(fileobj=archive.extractfile(entry), mode="r|") as layer:
                    for member in layer:
                        path = PurePosixPath(member.name)
                        where = f"{member.name} (layer {entry.name.split('/')[0][:12]})"
                        if path.name in SECRET_NAMES or member.name.startswith("run/secrets/"):
                            found.append(where)
                        elif (member.isfile() and member.size in secrets
                              and not member.name.startswith(SYSTEM_BUNDLE_DIR)):
                            digest = hashlib.sha256(layer.extractfile(member).read()).hexdigest()
                            if digest in secrets[member.size]:
                                found.append(f"{where}: a copy of the build's CA bundle")
    finally:
        save.stdout.close()
        assert save.wait() == 0, "docker save failed"
    assert layers > 3
    assert found == [], f"secrets baked into the image: {found}"


def test_no_secret_in_history_or_config(image, inspect):
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    config = json.dumps(inspect["Config"])
    cert = discover().pip_cert
    for text, what in ((history, "docker history"), (config, "the image config")):
        assert not CREDENTIAL_URL.search(text), f"a URL with credentials in {what}"
        assert "PIP_CERT=/" not in text and "--cert" not in text, f"pip's CA path in {what}"
        assert "netrc" not in text.lower(), f"a netrc named in {what}"
        if cert is not None:
            assert f"COPY {cert}" not in text and f"ADD {cert}" not in text
    env = dict(e.split("=", 1) for e in inspect["Config"]["Env"])
    assert not {"PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "NETRC"} & set(env)


def test_labels_carry_every_pin(image, inspect):
    labels = inspect["Config"]["Labels"]
    out = docker("run", "--rm", image, "versions", "--json", check=False)
    assert out.returncode == 0, out.stdout + out.stderr   # 1: installed differs from pinned
    reported = {r["name"]: r["pinned"] for r in json.loads(out.stdout) if r["pinned"] is not None}
    labelled = {k.removeprefix(LABEL_PREFIX): v for k, v in labels.items()
                if k.startswith(LABEL_PREFIX)}
    assert labelled == reported
    flavor = labels["io.triton-vllm.flavor"]
    get = pins.get
    expected = {"triton-release": get("triton.upstream_container_version"),
                "numpy": get("python_packages.numpy"), "pip": get("python_packages.pip"),
                get(f"vllm.{flavor}_package"): get(f"vllm.{flavor}_version")}
    if flavor == "cpu":
        expected |= {"tritonserver": get("triton.server_version"),
                     "nvidia-pytriton": get("triton.nvidia_pytriton"),
                     "torch": get("python_packages.torch_cpu"),
                     "python": get("base.cpu_python"), "base-image": get("base.cpu_image")}
    assert {k: labelled.get(k) for k in expected} == expected


def test_size_within_budget(image, inspect):
    size = inspect["Size"]
    record("image_size_bytes", size, "B")
    record("image_size_gb", round(size / 1e9, 3), "GB")
    if inspect["Config"]["Labels"].get("io.triton-vllm.flavor") != "cpu":
        pytest.skip("the size budget is the CPU image's")
    budget = pins.get("image.cpu_size_budget")
    assert size <= budget, (f"{image} is {size / 1e9:.3f} GB, over the {budget / 1e9:.3f} GB "
                            f"budget in versions.toml ([image] cpu_size_budget)")

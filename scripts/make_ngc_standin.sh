#!/usr/bin/env bash
# Make a stand-in for nvcr.io/nvidia/tritonserver:<release>-py3 where NGC cannot be reached:
# the same Ubuntu and Python (versions.toml [ngc]), NGC's user (triton-server, uid 1000),
# its /opt/nvidia entrypoint layout (scripts/ngc_standin/: the documented behaviour of
# nvidia_entrypoint.sh and of the Vertex AI hook, written for this stand-in), and
# tritonserver with the Python backend from the nvidia-pytriton wheel.  No CUDA: it stands
# in for the image's layout, not for its GPU libraries.
#
# Usage: scripts/make_ngc_standin.sh [RELEASE]   (default: the GPU image's release)
# TVB_NGC_STANDIN_IMAGE names the image (default local/ngc-standin:<release>-py3).
# Prints the image name.  Idempotent.  Needs root (debootstrap) and a Docker engine.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
py="${TVB_PYTHON:-python3}"
pins() { "$py" -m tritonbuild.pins "$@"; }
cd "$repo"
release="${1:-$(pins get triton.gpu_upstream_container_version)}"
row() { "$py" -c "from tritonbuild import pins; print(pins.ngc_release('$release')['$1'])"; }
ubuntu=$(row ubuntu)
python=$(row python)
image="${TVB_NGC_STANDIN_IMAGE:-local/ngc-standin:$release-py3}"
docker_bin=/usr/bin/docker

if "$docker_bin" image inspect "$image" >/dev/null 2>&1; then
    echo "$image"; exit 0
fi
case "$ubuntu" in
    22.04) suite=jammy ;;
    24.04) suite=noble ;;
    *) echo "make_ngc_standin: no Ubuntu suite known for $ubuntu" >&2; exit 2 ;;
esac
mirror="${TVB_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}"
# Debian (bookworm) has no package of Ubuntu's archive key: verify with it where the host
# has it, else fetch unverified.  The image is a throwaway test base, never shipped.
keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg
if [ -f "$keyring" ]; then check=(--keyring="$keyring"); else check=(--no-check-gpg); fi
rootfs=$(mktemp -d /var/tmp/tvb-ngc-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
# Debian's debootstrap has no script for every Ubuntu suite; jammy's fits them all.
debootstrap --variant=minbase --components=main,universe "${check[@]}" \
    --include=ca-certificates \
    "$suite" "$rootfs" "$mirror" /usr/share/debootstrap/scripts/jammy >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2; exit 1; }
rm -f "$rootfs.log" "$rootfs"/var/cache/apt/archives/*.deb
echo "deb $mirror $suite main universe" >"$rootfs/etc/apt/sources.list"
tar -C "$rootfs" -c . | "$docker_bin" import --change 'ENV LANG=C.UTF-8' - "$image.rootfs" >/dev/null

# NGC's layout on top: user, entrypoint, tritonserver from nvidia-pytriton.
ctx=$(mktemp -d)
trap 'rm -rf "$rootfs" "$ctx"' EXIT
cp -r scripts/ngc_standin "$ctx/ngc"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $image.rootfs
# apt, not debootstrap: it resolves names Ubuntu has moved (libpython3.12 -> ...t64).
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        python$python libpython$python python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 1000 --create-home --home-dir /home/triton-server triton-server \
 && rm -rf /home/triton-server
COPY ngc/ /opt/nvidia/
RUN --mount=type=secret,id=pip_cert \
    if [ -f /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python$python -m venv /tmp/pt && /tmp/pt/bin/pip install -q --no-deps \
        nvidia-pytriton==$(pins get triton.nvidia_pytriton) \
 && site=\$(/tmp/pt/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
 && cp -r "\$site/pytriton/tritonserver" /opt/tritonserver \
 && cp "/opt/tritonserver/python_backend_stubs/$python/triton_python_backend_stub" \
        /opt/tritonserver/backends/python/ \
 && cp -r "\$site/nvidia_pytriton.libs" /opt/tritonserver/lib \
 && rm -rf /tmp/pt
ENV PATH=/opt/tritonserver/bin:\$PATH \
    LD_LIBRARY_PATH=/opt/tritonserver/lib \
    NVIDIA_VISIBLE_DEVICES=all
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
DOCKERFILE
cert=$(pip config get global.cert 2>/dev/null || echo /etc/ssl/certs/ca-certificates.crt)
DOCKER_BUILDKIT=1 "$docker_bin" build -q --secret "id=pip_cert,src=$cert" -t "$image" "$ctx" >&2
"$docker_bin" image rm "$image.rootfs" >/dev/null
echo "$image"

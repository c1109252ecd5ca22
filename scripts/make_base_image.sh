#!/usr/bin/env bash
# Make the local Debian base image with debootstrap when no registry can be reached.
#
# Usage: scripts/make_base_image.sh [IMAGE [SUITE]]   (default local/debian:bookworm bookworm)
# The mirror is the one this machine's apt already uses (or TVB_DEBIAN_MIRROR), so the
# image's own apt sources work inside builds exactly as on the host; with neither, it
# stops with an error rather than guess a host.  Idempotent.
set -euo pipefail

image="${1:-local/debian:bookworm}"
suite="${2:-bookworm}"
docker_bin=/usr/bin/docker

if "$docker_bin" image inspect "$image" >/dev/null 2>&1; then
    echo "make_base_image: $image already present"
    exit 0
fi

mirror="${TVB_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
    # Both apt formats keep the URL in field 2 ("URIs: URL" and "deb URL SUITE ...").
    # TVB_APT_SOURCES: the files to read instead (tests).
    # shellcheck disable=SC2086
    mirror=$( { grep -hsE '^(URIs:|deb )' \
        ${TVB_APT_SOURCES:-/etc/apt/sources.list.d/*.sources /etc/apt/sources.list} \
        | grep -v security || true; } | head -n 1 | awk '{print $2}')
fi
if [ -z "$mirror" ]; then
    echo "make_base_image: no Debian mirror in apt's sources (/etc/apt/sources.list.d/*.sources," \
        "/etc/apt/sources.list); set TVB_DEBIAN_MIRROR to the mirror debootstrap should use" >&2
    exit 1
fi

rootfs=$(mktemp -d /var/tmp/tvb-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "make_base_image: debootstrap $suite from $mirror"
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2; exit 1; }
rm -f "$rootfs.log"
# debootstrap leaves the mirror it used as the only apt source; keep security updates too.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "$docker_bin" import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$image" >/dev/null
echo "make_base_image: made $image"

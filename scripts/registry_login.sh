#!/usr/bin/env bash
# Log the Docker client in to NIGHTLY_REGISTRY's host with REGISTRY_USER and
# REGISTRY_PASSWORD from the environment (the password goes through stdin, never argv).
# build.py --push then finds the credentials in the Docker config, as a person's would.
set -euo pipefail
registry=${NIGHTLY_REGISTRY:?NIGHTLY_REGISTRY (REGISTRY/REPO) is not set}
eval "$("$(dirname "$0")/setup_host.sh")"
printf '%s' "${REGISTRY_PASSWORD:?}" | docker login --username "${REGISTRY_USER:?}" \
    --password-stdin "${registry%%/*}"

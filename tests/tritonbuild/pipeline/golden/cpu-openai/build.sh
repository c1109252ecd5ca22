#!/bin/sh
# The exact build command of this plan, as build.py runs it.  DOCKER_HOST
# comes from the environment (scripts/start_docker.sh prints it).
set -e
exec env DOCKER_BUILDKIT=1 /usr/bin/docker \
    build \
    --progress=auto \
    --file=/srv/tvb-build/Dockerfile \
    --tag=tritonserver-vllm:24.10-cpu \
    --secret=id=pip_cert,src=<cert> \
    /srv/tvb-build/context

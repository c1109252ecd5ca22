#!/bin/sh
# The exact build command of this plan, as build.py runs it.  DOCKER_HOST
# comes from the environment (scripts/start_docker.sh prints it).
set -e
exec env DOCKER_BUILDKIT=1 /usr/bin/docker \
    build \
    --progress=plain \
    --file=/srv/tvb-build/Dockerfile \
    --tag=me/triton:dev \
    --secret=id=pip_cert,src=<cert> \
    --build-arg=PIP_INDEX_URL=https://pypi.example/simple \
    --build-arg=PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu \
    --no-cache \
    /srv/tvb-build/context

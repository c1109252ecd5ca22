#!/usr/bin/env bash
# Start a Docker engine when none answers, and print the DOCKER_HOST to use.
#
# Machines without systemd (CI containers, fresh dev boxes) have Debian's
# docker.io installed but no daemon running, so we run dockerd ourselves with
# its state under one folder.  Idempotent: a daemon that already answers on the
# socket is reused.
set -euo pipefail

state_dir="${TVB_DOCKER_STATE:-/var/lib/triton-vllm-build/docker}"
socket="${TVB_DOCKER_SOCKET:-/run/triton-vllm-build/docker.sock}"
export DOCKER_HOST="unix://${socket}"
client=/usr/bin/docker   # Debian's client: the one whose BuildKit works without a buildx plugin

if [ ! -x /usr/sbin/dockerd ] || [ ! -x "$client" ]; then
    echo "start_docker: Debian's docker.io is not installed (run scripts/setup_host.sh)" >&2
    exit 1
fi

if "$client" info >/dev/null 2>&1; then
    echo "$DOCKER_HOST"
    exit 0
fi

mkdir -p "$state_dir" "$(dirname "$socket")"
log="$state_dir/dockerd.log"
nohup /usr/sbin/dockerd \
    --data-root "$state_dir/data" \
    --exec-root "$state_dir/exec" \
    --host "$DOCKER_HOST" \
    --pidfile "$state_dir/dockerd.pid" \
    >"$log" 2>&1 &

for _ in $(seq 1 60); do
    if "$client" info >/dev/null 2>&1; then
        echo "$DOCKER_HOST"
        exit 0
    fi
    sleep 1
done
echo "start_docker: dockerd did not answer on $socket within 60 s; last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 1

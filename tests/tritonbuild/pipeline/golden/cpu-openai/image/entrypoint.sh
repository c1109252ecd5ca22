#!/bin/bash
# Entrypoint of the Triton + vLLM image (rendered by build.py for this image's flags).
#
#   (no arguments)      start tritonserver and the OpenAI frontend and the model watch
#   -ARGS...            the same, with ARGS added to tritonserver's flags
#   serve MODEL [FLAGS] [-- ARGS...]
#                       the same, on a repository made for MODEL (a model folder) and
#                       `vllm serve`'s flags, in $SERVE_DIR (default /tmp/triton-vllm-serve);
#                       ARGS after `--` are added to tritonserver's flags.  --api-key K
#                       reaches the frontend as TRITON_OPENAI_API_KEY, not as a flag
#   serve --models FILE the same, for the models a YAML file lists
#   worker --models FILE | worker MODEL [FLAGS]
#                       a multi-node group's worker: this pod's ranks of the one model
#                       that the group's leader serves with the same flags (vLLM's
#                       multi-node launcher; LeaderWorkerSet's LWS_* variables say where
#                       the leader is and which node this is)
#   versions [--json]   report every pinned version, checked against what is installed
#   COMMAND ARGS...     run COMMAND instead (e.g. `tritonserver --model-repository=/models`)
#
# MODEL_REPOSITORY picks the model repository (default: the sample one in the image);
# FRONTEND_ARGS_FILE, flags for the OpenAI frontend (NUL-separated, as serve writes them).
# TRITON_IN_PROCESS=1 runs the OpenAI frontend alone, with Triton in its own process.
set -euo pipefail

# serve: the repository is made (and every flag checked, by vLLM's own parser) before
# anything starts; a bad flag or model path ends here with the parser's message.  Then
# this script runs again in this process (exec), with TRITON_VLLM_SERVED naming what
# serve made and only tritonserver's flags as arguments: serve's, which may hold an
# --api-key, are then gone from the container's process list (`ps`, /proc/1/cmdline).
if [ -n "${TRITON_VLLM_SERVED:-}" ]; then
    serve_dir=$TRITON_VLLM_SERVED
    unset TRITON_VLLM_SERVED
    export MODEL_REPOSITORY="$serve_dir/model_repository"
    FRONTEND_ARGS_FILE="$serve_dir/frontend.args"
    # serve's --api-key, from the file that only this user can read, reaches the
    # frontend in its environment, never on its command line.
    if [ -f "$serve_dir/api-key" ]; then
        TRITON_OPENAI_API_KEY=$(<"$serve_dir/api-key")
        export TRITON_OPENAI_API_KEY
    fi
elif [ "${1:-}" = "versions" ]; then
    shift
    exec /opt/venv/bin/python /opt/triton-vllm/report_versions.py "$@"
elif [ "${1:-}" = "worker" ]; then
    shift
    PYTHONPATH="/opt/tritonserver/backends/vllm${PYTHONPATH:+:$PYTHONPATH}" \
        exec python3 -m triton_vllm_backend.worker "$@"
elif [ "${1:-}" = "serve" ]; then
    shift
    serve_args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        serve_args+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift  # the `--`: what follows is tritonserver's
    serve_dir="${SERVE_DIR:-/tmp/triton-vllm-serve}"
    mkdir -p "$serve_dir"
    serve_status=0
    PYTHONPATH="/opt/tritonserver/backends/vllm${PYTHONPATH:+:$PYTHONPATH}" \
        python3 -m triton_vllm_backend.serve "$serve_dir" "${serve_args[@]}" || serve_status=$?
    # 10 (serve's EXIT_HELP_ONLY): `serve --help` printed the flags, and the repository
    # there is an earlier run's, so nothing starts.
    [ "$serve_status" -eq 10 ] && exit 0
    [ "$serve_status" -eq 0 ] || exit "$serve_status"
    TRITON_VLLM_SERVED="$serve_dir" exec "$0" "$@"
fi

# Every client connection is a file descriptor of the server's.  Many runtimes start a
# container with a soft limit of 1024 (systemd's default, which containerd 2 passes on):
# at about a thousand connections tritonserver's HTTP server then spins on accept() and
# stops answering, and the frontend fails to open its tokenizer's files.  The hard limit
# is what the host allows; take all of it, as Go servers do on their own.
nofile_hard=$(ulimit -Hn)
ulimit -Sn "$nofile_hard" 2>/dev/null || true
if [ "$(ulimit -Sn)" != unlimited ] && [ "$(ulimit -Sn)" -lt 8192 ]; then
    echo "entrypoint: open files limited to $(ulimit -Sn) (hard limit $nofile_hard):" \
         "fewer client connections than that get served; raise it (docker run" \
         "--ulimit nofile=N:N, or the container runtime's default)" >&2
fi

if [ -z "${serve_dir:-}" ] && [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    exec "$@"
fi

frontend_args=()
if [ -n "${FRONTEND_ARGS_FILE:-}" ]; then
    mapfile -d '' -t frontend_args < "$FRONTEND_ARGS_FILE"
fi

# The statistics API is closed unless TRITON_STATISTICS_KEY is set (built without --enable-stats).
TRITON_STATISTICS_KEY="${TRITON_STATISTICS_KEY:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
# Triton's model-repository API (loading a model runs its code), shared memory, trace and
# logging answer only requests that carry this key (`triton-model-control-key: KEY`).
# Random unless set; the processes started here get it in their environment, exec probes
# (the model watch's --once) from a file that only this user can read.
TRITON_MODEL_CONTROL_KEY="${TRITON_MODEL_CONTROL_KEY:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
export TRITON_MODEL_CONTROL_KEY
key_file="${TRITON_MODEL_CONTROL_KEY_FILE:-/tmp/triton-vllm/model-control-key}"
if ! { mkdir -p -m 0700 "$(dirname "$key_file")" && key_tmp=$(mktemp "$key_file.XXXXXX") &&
       printf '%s' "$TRITON_MODEL_CONTROL_KEY" > "$key_tmp" && mv -f "$key_tmp" "$key_file"
     } 2>/dev/null
then
    echo "entrypoint: cannot write the model-control key to $key_file: commands run" \
         "beside the server need TRITON_MODEL_CONTROL_KEY in their environment" >&2
fi
server_args=(
    "--model-repository=${MODEL_REPOSITORY:-/opt/tritonserver/model_repository}"
    "--backend-directory=/opt/tritonserver/backends"
    "--allow-http=true"
    "--http-port=8000"
    "--allow-grpc=true"
    "--grpc-port=8001"
    "--allow-metrics=true"
    "--metrics-port=8002"
    "--allow-gpu-metrics=false"
    "--allow-cpu-metrics=false"
    "--http-restricted-api=statistics:triton-statistics-key=${TRITON_STATISTICS_KEY}"
    "--grpc-restricted-protocol=statistics:triton-statistics-key=${TRITON_STATISTICS_KEY}"
    "--http-restricted-api=model-repository,shared-memory,trace,logging:triton-model-control-key=${TRITON_MODEL_CONTROL_KEY}"
    "--grpc-restricted-protocol=model-repository,shared-memory,trace,logging:triton-model-control-key=${TRITON_MODEL_CONTROL_KEY}"
    "--log-info=false"
)
# With the OpenAI frontend's key set, Triton's KServe inference endpoints ask for it too
# (`authorization: Bearer KEY`): one key covers every port a user exposes.
if [ -n "${TRITON_OPENAI_API_KEY:-}" ]; then
    server_args+=(
        "--http-restricted-api=inference:authorization=Bearer ${TRITON_OPENAI_API_KEY}"
        "--grpc-restricted-protocol=inference:authorization=Bearer ${TRITON_OPENAI_API_KEY}"
    )
fi

# Seconds that requests in flight get to finish when the container is stopped; give
# `docker stop -t` / terminationGracePeriodSeconds about 10 more.
SHUTDOWN_GRACE_SECONDS="${SHUTDOWN_GRACE_SECONDS:-20}"
export TRITON_OPENAI_SHUTDOWN_TIMEOUT="$SHUTDOWN_GRACE_SECONDS"

# TRITON_IN_PROCESS=1: the OpenAI frontend runs Triton in its own process (Triton's C API)
# instead of reaching a tritonserver: one process and one socket less per streamed token.
# It serves the OpenAI API alone (no KServe endpoints, so no tritonserver flags), drains
# on SIGTERM itself, and exits 4 when a model dies, for the container to be restarted.
if [ "${TRITON_IN_PROCESS:-0}" = 1 ]; then
    if [ $# -gt 0 ]; then
        echo "entrypoint: TRITON_IN_PROCESS=1 runs no tritonserver to take its flags: $*" >&2
        exit 2
    fi
    exec "triton-openai" "--model-repository=${MODEL_REPOSITORY:-/opt/tritonserver/model_repository}" "--host" "0.0.0.0" "--port" "9000" "${frontend_args[@]}"
fi

stopping=0
trap 'stopping=1' TERM INT

(
    # tritonserver has its keys in its flags; the engine's processes inherit its
    # environment, and torch's compile cache writes that environment into its files: the
    # keys stay with the processes that use them.
    unset TRITON_OPENAI_API_KEY TRITON_MODEL_CONTROL_KEY TRITON_STATISTICS_KEY
    # tritonserver takes the restricted APIs' keys only as flags, which anyone on the node
    # can read (ps, /proc): the preloaded library hides them there, then leaves LD_PRELOAD
    # as it was.
    export LD_PRELOAD="/opt/triton-vllm/lib/hide_restricted_api_keys.so${LD_PRELOAD:+ $LD_PRELOAD}"
    exec tritonserver "${server_args[@]}" --exit-timeout-secs="$SHUTDOWN_GRACE_SECONDS" "$@"
) &
triton_pid=$!
services=()
watches=()
# Over Triton's HTTP endpoint: per streamed token, the frontend spends about half the CPU
# it does over gRPC, and here it shares the CPUs with the engine.
triton-openai --triton-url http://localhost:8000 --host 0.0.0.0 --port 9000 "${frontend_args[@]}" &
services+=($!)
# Gives up on tritonserver when a vLLM model's engine or stub dies, or when it
# is not ready within START_TIMEOUT_SECONDS: the container then exits, for
# `docker run --restart` or Kubernetes to restart it (triton_vllm_backend/watch.py).
env PYTHONPATH=/opt/tritonserver/backends/vllm python3 -m triton_vllm_backend.watch --url http://127.0.0.1:8000 &
services+=($!)
watches+=($!)

# Stops each process in turn and waits for it; the status is the worst of theirs.
stop_in_order() {
    local status=0 pid code
    for pid in "$@"; do
        kill -TERM "$pid" 2>/dev/null || true
        while true; do
            code=0
            wait "$pid" || code=$?
            [ "$code" -eq 0 ] && break
            # A signal to this script interrupts wait (128+N) while the process runs on.
            if ! kill -0 "$pid" 2>/dev/null; then
                code=0
                wait "$pid" || code=$?  # its own status, kept by bash
                break
            fi
        done
        [ "$code" -gt "$status" ] && status=$code
    done
    return "$status"
}

# Run until a process ends or a signal arrives.  On SIGTERM/SIGINT the services (the
# frontend) stop first: they drain their requests while Triton still serves them, and
# end what cannot finish with an error; then tritonserver stops.  The container's status
# is then the worst of theirs: 0 when everything drained, non-zero when requests were cut.
# A process that ends on its own stops the others, and its status is the container's.
status=0
ended=
wait -n -p ended "$triton_pid" "${services[@]}" || status=$?
if [ "$stopping" = 1 ]; then
    status=0
    stop_in_order "${services[@]}" "$triton_pid" || status=$?
    exit "$status"
fi
# The watch gave up on tritonserver: nothing in flight can finish there, so it goes at
# once, and the frontend ends its streams with an error instead of draining them.
if [[ " ${watches[*]} " == *" ${ended:-none} "* ]]; then
    kill -KILL "$triton_pid" 2>/dev/null || true
fi
stop_in_order "${services[@]}" "$triton_pid" || true
exit "$status"

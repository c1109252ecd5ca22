#!/bin/bash
# Entrypoint of the Triton + vLLM image (rendered by build.py for this image's flags).
#
#   (no arguments)      start tritonserver
#   -ARGS...            the same, with ARGS added to tritonserver's flags
#   versions [--json]   report every pinned version, checked against what is installed
#   COMMAND ARGS...     run COMMAND instead (e.g. `tritonserver --model-repository=/models`)
#
# MODEL_REPOSITORY picks the model repository (default: the sample one in the image).
set -euo pipefail

if [ "${1:-}" = "versions" ]; then
    shift
    exec /opt/venv/bin/python /opt/triton-vllm/report_versions.py "$@"
fi
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    exec "$@"
fi

server_args=(
    "--model-repository=${MODEL_REPOSITORY:-/opt/tritonserver/model_repository}"
    "--backend-directory=/opt/tritonserver/backends"
    "--allow-http=true"
    "--http-port=8000"
    "--allow-grpc=true"
    "--grpc-port=8001"
    "--allow-sagemaker=true"
    "--sagemaker-port=8080"
    "--allow-vertex-ai=true"
    "--vertex-ai-port=8081"
    "--allow-metrics=true"
    "--metrics-port=8002"
    "--allow-gpu-metrics=true"
    "--allow-cpu-metrics=true"
    "--log-info=true"
    "--trace-config=level=TIMESTAMPS"
    "--trace-config=rate=1000"
    "--trace-config=triton,file=/tmp/triton-trace.json"
)

pids=()
stopping=0
stop() {
    stopping=1
    trap - TERM INT
    kill -TERM "${pids[@]}" 2>/dev/null || true
}
trap stop TERM INT

tritonserver "${server_args[@]}" "$@" &
pids+=($!)

# Run until either process ends or a signal arrives.  A process that ended on its own
# stops the other, and its status is the container's.  On SIGTERM/SIGINT both drain and
# stop: `wait -n` then only says a signal came (128+N), so the container's status is the
# worst of theirs, 0 when both stopped cleanly.
status=0
wait -n "${pids[@]}" || status=$?
if [ "$stopping" = 1 ]; then
    status=0
    for pid in "${pids[@]}"; do
        wait "$pid" || { code=$?; [ "$code" -gt "$status" ] && status=$code; }
    done
    exit "$status"
fi
stop
wait "${pids[@]}" 2>/dev/null || true
exit "$status"

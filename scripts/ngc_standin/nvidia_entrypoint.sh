#!/bin/bash
# Stand-in for NGC's /opt/nvidia/nvidia_entrypoint.sh, as its images document it: source
# every entrypoint.d/*.sh in name order in this shell (they may change the arguments),
# then run the arguments.  The real one also prints the banner and sets up CUDA forward
# compatibility; neither exists without a GPU.
set -e
for hook in "$(dirname "$0")"/entrypoint.d/*.sh; do
    [ -f "$hook" ] && source "$hook"
done
if [ $# -eq 0 ]; then exec /bin/bash; fi
exec "$@"

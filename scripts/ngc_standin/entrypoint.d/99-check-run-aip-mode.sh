# Stand-in for NGC's Vertex AI hook: with AIP_MODE set, `tritonserver` goes in front of
# the command.
if [ -n "${AIP_MODE:-}" ]; then
    set -- tritonserver "$@"
fi

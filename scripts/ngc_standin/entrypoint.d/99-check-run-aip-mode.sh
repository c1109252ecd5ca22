# Stand-in for NGC's Vertex AI hook, with the behaviour of the one on NVIDIA's release
# branches (24.10, 25.11, 26.08): with AIP_MODE set, tritonserver's full path goes in
# front of the command, whatever the command is.
set -- ${AIP_MODE:+"/opt/tritonserver/bin/tritonserver"} "$@"

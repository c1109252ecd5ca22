#!/usr/bin/env bash
# The GPU image's checks on a machine without a GPU or NGC access (nightly; downloads the
# CUDA vLLM environment, several GB):
#   1. each GPU lock resolves again, unchanged, against the real index;
#   2. every vLLM name the backend uses exists in each pinned vLLM's released sources, and
#      vLLM's model modules import what they need from the locked libraries;
#   3. every stage after the base builds, on a stand-in for NGC's image
#      (scripts/make_ngc_standin.sh: same Ubuntu, Python and /opt/nvidia layout);
#   4. in that image: `versions` (pins against what is installed, torch's CUDA build),
#      the same through the Vertex AI hook (AIP_MODE), and the backend's imports against
#      the installed vLLM.
#
# Usage: scripts/gpu_standin_check.sh [RELEASE]   (default: the GPU image's release)
# TVB_STANDIN_STEPS=12 runs steps 1 and 2 only (seconds, no Docker).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
eval "$(scripts/setup_host.sh)"
py="$TVB_VENV/bin/python"
steps="${TVB_STANDIN_STEPS:-1234}"
release="${1:-$("$py" -m tritonbuild.pins get triton.gpu_upstream_container_version)}"
tag="tritonserver-vllm:gpu-standin-$release"
say() { echo "gpu_standin_check: $*"; }

if [[ $steps == *1* ]]; then
    say "1. the locks resolve again, unchanged"
    "$py" scripts/lock_gpu.py --check
fi
if [[ $steps == *2* ]]; then
    say "2. the backend's vLLM names in each pinned vLLM"
    "$py" -m tritonbuild.tools.vllm_api
    "$py" -m tritonbuild.tools.model_imports "$release"
fi
if [[ $steps == *3* ]]; then
    say "3. the GPU image's stages on a stand-in base"
    base=$(TVB_PYTHON="$py" scripts/make_ngc_standin.sh "$release")
    "$py" build.py --backend=vllm --endpoint=openai --enable-gpu \
        --upstream-container-version="$release" --image="gpu-base,$base" \
        --build-dir="$repo/build/gpu-standin" --tag="$tag" -v
fi
if [[ $steps == *4* ]]; then
    say "4. the image's checks"
    docker run --rm "$tag" versions
    # NGC's hook puts tritonserver in front of the command; the image's hook takes it off.
    docker run --rm -e AIP_MODE=PREDICTION "$tag" versions >/dev/null
    docker run --rm -v "$repo/tritonbuild/tools/vllm_api.py:/check/vllm_api.py:ro" \
        -v "$repo/tritonbuild/tools/wheel_sources.py:/check/wheel_sources.py:ro" \
        -v "$repo/tritonbuild/tools/vllm_members.py:/check/vllm_members.py:ro" \
        -e TVB_BACKEND_DIR=/opt/tritonserver/backends/vllm \
        -e PYTHONPATH=/opt/tritonserver/backends/vllm \
        --entrypoint /opt/venv/bin/python "$tag" -c '
import sys; sys.path.insert(0, "/check")
import vllm_api
problems = vllm_api.check(vllm_api.installed_sources())
print("\n".join(problems) or "installed vllm: every name the backend uses exists")
import triton_vllm_backend.stub.compat, vllm.engine.arg_utils, vllm.v1.engine.async_llm  # noqa
sys.exit(bool(problems))'
fi
say "passed"

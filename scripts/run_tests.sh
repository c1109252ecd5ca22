#!/usr/bin/env bash
# Run the whole test suite but the GPU tests in two passes: on this host, the unit tests,
# golden files, the real image build and the end-to-end suites that need a server on this
# host; then the end-to-end suites that users' image serves (qa/common/passes.py), against
# a container of the image just built.
#
# Sets up what it needs first (scripts/setup_host.sh).  Extra arguments go to pytest
# (one pass, on this host unless TVB_IMAGE names an image), e.g.
# `scripts/run_tests.sh tests/` for the fast unit tests alone.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
eval "$("$repo/scripts/setup_host.sh")"

# The frontend is an installable package; the suites import the checkout's copy.
if [ -f "$repo/frontends/openai/pyproject.toml" ]; then
    "$TVB_VENV/bin/python" -m pip install -q --no-deps -e "$repo/frontends/openai" \
        2> >(grep -v "^WARNING: Location 'file://" >&2)
fi

cd "$repo"
# Servers the suites start (triton-openai, the backend's stub) import this checkout's
# frontend too, not whichever checkout was last installed into the shared environment.
export PYTHONPATH="$repo/frontends/openai/src${PYTHONPATH:+:$PYTHONPATH}"
pytest=("$TVB_VENV/bin/python" -m pytest -m "not gpu")
if [ $# -gt 0 ]; then
    exec "${pytest[@]}" "$@"
fi

# Lint first: a finding fails the run as a test would (settings in pyproject.toml).
"$TVB_VENV/bin/ruff" check "$repo"
"$TVB_VENV/bin/vulture"  # code nothing calls ([tool.vulture] in pyproject.toml)

# qa/L0_build_image builds this tag; the image pass then runs what it built.  Removed
# first, so that a failed build cannot leave an older image to be tested.
export TVB_IMAGE_TAG=${TVB_IMAGE_TAG:-tritonserver-vllm:test}
docker image rm -f "$TVB_IMAGE_TAG" >/dev/null 2>&1 || true

# The image pass's suites run once, against the image users run; the host pass keeps only
# their host_mode tests and the OpenAI checks of the frontend's gRPC client, which the
# image's frontend does not use (qa/common/passes.py says which suites, and why).
# The file itself, not `-m qa.common.passes`: the qa package imports the backend's modules,
# which only pytest's pythonpath setting puts on the path.
image_suites_text=$("$TVB_VENV/bin/python" qa/common/passes.py)
mapfile -t image_suites <<<"$image_suites_text"
# The image checks suite runs as qa/L0_publish's QA gate (build.py --qa --push), not twice.
gate_suite=$("$TVB_VENV/bin/python" qa/common/passes.py --gate)
slowest=(--durations=30)
status=0
"${pytest[@]}" -m "not gpu and (not image_pass or host_mode or grpc_transport)" \
    --ignore="$gate_suite" "${slowest[@]}" || status=$?
if docker image inspect "$TVB_IMAGE_TAG" >/dev/null 2>&1; then
    echo "run_tests: the end-to-end suites against a container of $TVB_IMAGE_TAG"
    TVB_IMAGE=$TVB_IMAGE_TAG "${pytest[@]}" "${slowest[@]}" "${image_suites[@]}" || status=$?
else
    echo "run_tests: $TVB_IMAGE_TAG was not built, so the image pass did not run" >&2
    status=1
fi
exit "$status"

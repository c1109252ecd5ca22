#!/usr/bin/env bash
# Run the whole test suite but the GPU tests: unit tests, golden files, the real image
# build, and the end-to-end suites against a real tritonserver + vLLM on this machine.
#
# Sets up what it needs first (scripts/setup_host.sh).  Extra arguments go to pytest,
# e.g. `scripts/run_tests.sh tests/` for the fast unit tests alone.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
eval "$("$repo/scripts/setup_host.sh")"

# The frontend is an installable package; the suites import the checkout's copy.
if [ -f "$repo/frontends/openai/pyproject.toml" ]; then
    "$TVB_VENV/bin/python" -m pip install -q --no-deps -e "$repo/frontends/openai" \
        2> >(grep -v "^WARNING: Location 'file://" >&2)
fi

cd "$repo"
exec "$TVB_VENV/bin/python" -m pytest -m "not gpu" "$@"

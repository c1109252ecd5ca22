"""Which suites `scripts/run_tests.sh` runs in its image pass.

Users run the image, so every end-to-end check of these suites runs once, against a
container of the image just built.  The host pass leaves them out, except the tests marked
`host_mode` (they inspect a server started on this host: its processes, its log, a
frontend on its own against a Triton elsewhere, which a container cannot show) and
`grpc_transport` (OpenAI checks through the frontend's KServe gRPC client, its default
`--triton-url`; the image's frontend talks HTTP to its Triton).

The image checks suite, QA_GATE_SUITE, runs once too: as the QA gate of
qa/L0_publish's `build.py --qa=L0_image --push` test, which fails on any of its failures
and names them; the host pass leaves the suite itself out.  Run it on its own with
`scripts/run_tests.sh qa/L0_image`.

    python qa/common/passes.py          # prints the suites, one a line, for run_tests.sh
                                        # (no imports: it runs without the suites' pythonpath)
    python qa/common/passes.py --gate   # prints the suite the publish test's gate runs
"""

from __future__ import annotations

IMAGE_PASS_SUITES = (
    "qa/L0_backend_vllm",
    "qa/L0_openai",
    "qa/L0_lifecycle",
    "qa/L0_aiperf",
    "qa/L0_prometheus",
    "qa/L0_multinode",
)

# The suite `build.py --qa=...` runs before the push in qa/L0_publish.
QA_GATE_SUITE = "L0_image"


def in_image_pass(relative_path: str) -> bool:
    """Whether a test file (a path relative to the repository root) is in the image pass."""
    path = relative_path.replace("\\", "/")
    return any(path == suite or path.startswith(suite + "/") for suite in IMAGE_PASS_SUITES)


if __name__ == "__main__":
    import sys
    print(f"qa/{QA_GATE_SUITE}" if sys.argv[1:] == ["--gate"] else "\n".join(IMAGE_PASS_SUITES))

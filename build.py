#!/usr/bin/env python3
"""Build a Triton Inference Server image that serves LLMs with vLLM.

    ./build.py --backend=vllm --endpoint=openai [--enable-metrics] [--dryrun] ...
    ./build.py --help

Runs on the host's python3 with Jinja2 (scripts/setup_host.sh installs it; or
`pip install jinja2`).  The work is done by the tritonbuild package next to this file.
"""
import sys

try:
    import jinja2  # noqa: F401
except ImportError:
    sys.exit("build.py: error: Jinja2 is missing: pip install jinja2 (or run scripts/setup_host.sh)")

from tritonbuild.cli import main

if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Build a Triton Inference Server image that serves LLMs with vLLM.

    ./build.py --backend=vllm --endpoint=openai [--enable-metrics] [--dryrun] ...
    ./build.py --help

Needs Python 3.11+ with Jinja2.  Without Jinja2 here, it runs itself with the test
environment's Python ($TVB_VENV, which `eval "$(scripts/setup_host.sh)"` exports).
The work is done by the tritonbuild package next to this file (see tritonbuild/README.md).
"""
import os
import sys

try:
    import jinja2  # noqa: F401
except ImportError:
    venv = os.environ.get("TVB_VENV", "/nonexistent")
    venv_python = os.path.join(venv, "bin", "python")
    # sys.prefix, not the interpreter: a venv's python is a link to the system one.
    if os.access(venv_python, os.X_OK) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(venv_python, [venv_python, *sys.argv])
    sys.exit("build.py: error: Jinja2 is missing: pip install jinja2, or "
             "eval \"$(scripts/setup_host.sh)\" and run build.py again")

from tritonbuild.cli import main

if __name__ == "__main__":
    sys.exit(main())

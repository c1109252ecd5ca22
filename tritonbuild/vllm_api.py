"""`python -m tritonbuild.vllm_api`, the command the READMEs give; the code is tools/vllm_api.py."""
import sys

from .tools.vllm_api import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

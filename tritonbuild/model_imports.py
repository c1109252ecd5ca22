"""`python -m tritonbuild.model_imports`, the command the READMEs give; the code is
tools/model_imports.py."""
import sys

from .tools.model_imports import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

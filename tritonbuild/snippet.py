"""`python3 -m tritonbuild.snippet`, the command the READMEs give; the code is tools/snippet.py."""
import sys

from .tools.snippet import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

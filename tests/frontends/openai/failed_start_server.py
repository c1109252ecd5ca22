"""`triton-openai --model-repository DIR`'s main() with a Triton in this process whose
start fails at once (capi_fakes.FakeCapi), as a real process:

    python failed_start_server.py PORT MODEL_REPOSITORY LIBRARY_FILE
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from capi_fakes import FakeCapi, failing_start  # noqa: E402

from triton_openai import cli  # noqa: E402
from triton_openai.triton import capi  # noqa: E402

if __name__ == "__main__":
    port, repository, library = sys.argv[1:4]
    capi.load = lambda path=None: FakeCapi(failing_start())
    sys.exit(cli.main(["--host", "127.0.0.1", "--port", port, f"--model-repository={repository}",
                       f"--triton-library={library}"]))

"""Commands beside the build: the Dockerfile snippet for an existing Triton image, and the
checks that every pinned vLLM release has the names the backend and vLLM's model modules
import (run by scripts/gpu_standin_check.sh and the unit tests)."""

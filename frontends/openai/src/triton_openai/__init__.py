"""OpenAI-compatible HTTP frontend for Triton Inference Server's vLLM backend.

Public API: `build_app(config, client=None)` makes the FastAPI application,
`FrontendConfig` holds its settings, `main()` is the `triton-openai` command.
"""

from .app import build_app
from .cli import main
from .config import FrontendConfig

__all__ = ["FrontendConfig", "build_app", "main"]
__version__ = "0.1.0"

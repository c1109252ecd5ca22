"""The compiled part of the frontend: Triton's response callbacks for the in-process mode.

Optional: without a C compiler the package installs without it, and only
`triton-openai --model-repository` (Triton in the frontend's process) is unavailable.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("triton_openai.triton._capi_shim",
                             ["src/triton_openai/triton/_capi_shim.c"], optional=True)])

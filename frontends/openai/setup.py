"""The compiled part of the frontend: Triton's response callbacks for the in-process mode.

Required: an install without a C compiler fails here, loudly, rather than installing a
frontend whose `triton-openai --model-repository` (Triton in the frontend's process)
then dies at start.  The image builds the wheel where gcc and Python's headers are.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("triton_openai.triton._capi_shim",
                             ["src/triton_openai/triton/_capi_shim.c"])])

"""The vLLM backend for Triton, beside `model.py`, which Triton's Python backend runs.

- `stub/`: the model's own code, run inside the Python backend's stub process.
- `serve`, `install`, `watch` (`python3 -m triton_vllm_backend.<command>`) and
  `vllm_dist` (run as a script): the image's commands, run beside tritonserver or while
  the image is built, with the modules they alone use: `repository` (serve's) and
  `access` (watch's).  They import from `stub/` what they share with the model (its
  wire contract, model.json and its inputs), never the other way round.
"""

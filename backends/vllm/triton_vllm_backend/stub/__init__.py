"""What runs inside Triton's Python-backend stub: the model's code that `model.py` calls.

Each module has one job.  The pure ones (`wire`, `io_spec`, `params`, `engine_config`,
`outputs`, `lora`, `feed`, `abort`, `health`, `errors`, ...) import nothing from vLLM or
Triton at module level, so they are unit-tested without either, and the image's commands
beside it (`serve`, `watch`) import what they share with the stub from here: the wire
contract (`wire`), model.json's reading (`engine_config`) and the inputs and outputs a
model declares (`io_spec`).  Nothing here imports those commands.
"""

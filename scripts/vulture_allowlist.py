"""Names that vulture cannot see used (`[tool.vulture]` in pyproject.toml): each is read by
a caller outside Python's view.  A name listed here that the code drops is harmless; a new
one belongs in the group that says who uses it."""
# ruff: noqa: B018, F821

# Component methods and attributes the Dockerfile templates (dockerfiles/*.j2) call.
runtime_packages
build_packages
image_packages
pip_steps
pip_uninstall
services
aip_mode_prefixes
takes_frontend_args
pin
serve_args
repository_dir
models_dir
server_preload
library_dir

# Fields of a plan dataclass, read through dataclasses.fields() and written to plan.json.
release_kind

# Fields of pydantic request models: the API's surface, read by pydantic and by name.
strict
tool_call_id
reasoning_content
owned_by
presence_penalty
frequency_penalty
top_k
min_p
repetition_penalty
min_tokens
ignore_eos
skip_special_tokens
include_obfuscation
safety_identifier
prompt_cache_key
max_tool_calls
conversation
token_strs

# Callbacks a protocol's caller makes: asyncio, httptools, html.parser, io, http.server,
# uvicorn's Server.
connection_made
data_received
connection_lost
on_headers_complete
on_body
on_message_complete
handle_starttag
handle_data
seekable
readable
tell
do_GET
do_POST
log_message
handle_exit
force_exit
should_exit

# vLLM's StatLoggerBase interface (the engine calls them, some arguments by keyword).
log_engine_initialized
engine_idx
mm_cache_stats
pooling_params

# Triton's pb_utils error codes, mirrored by the unit tests' fake of it.
INVALID_ARG
UNKNOWN

# vLLM reads it from the argparse namespace that worker.py hands its headless runner.
api_server_count

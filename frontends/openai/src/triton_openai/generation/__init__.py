"""The generation pipeline that completions, chat completions and the Responses API share:
a prompt and its token budget (`prompts.py`), the sampling parameters with their
structured-output constraint (`structured.py`), the Triton requests of one API request
and their merged streams (`service.py`, `fanin.py`), and logprobs in OpenAI's layouts
(`logprobs.py`).  It knows no chat messages: those are conversation/'s."""

"""One short generation before the model says it is ready.

An engine's first request pays for what vLLM sets up lazily: on the 2-core CPU image a
first generate_stream took 41-46 ms to its first token against 7-13 ms for the next
ones, and vLLM's own server pays the same.  Paid here, in initialize(), it is spent
before Triton marks the model ready, so no client waits for it.  The statistics loggers
are paused meanwhile: the warm-up is not a request anybody sent, and must not show in
the metrics.
"""

from __future__ import annotations

import time

# What a warm-up asks: a word of prompt and two tokens, enough to run a prefill and a
# decode step, and to detokenize.
PROMPT_TEXT = "Hello"
PROMPT_TOKENS = [0]  # for engines without a tokenizer (skip_tokenizer_init)
MAX_TOKENS = 2
REQUEST_ID = "backend-warmup"
TIMEOUT_S = 300  # past it the first request pays instead


def prompt(has_tokenizer: bool) -> dict:
    return {"prompt": PROMPT_TEXT} if has_tokenizer else {"prompt_token_ids": PROMPT_TOKENS}


async def generate_once(engine, sampling, prompt: dict, loggers=()) -> float:
    """Run one generation to its end; the seconds it took.  `loggers` (the backend's
    vLLM stat loggers) record nothing until it is over."""
    for logger in loggers:
        logger.paused = True
    t0 = time.perf_counter()
    try:
        async for _ in engine.generate(prompt, sampling, REQUEST_ID):
            pass
    finally:
        # vLLM's output handler records a step's statistics in the same turn of its loop
        # that hands the step's outputs over (no await between them for a request that
        # ends by length), so the last step is past the loggers when this loop ends.
        for logger in loggers:
            logger.paused = False
    return time.perf_counter() - t0

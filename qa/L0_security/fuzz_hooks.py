"""schemathesis hooks for the hostile suite's fuzzing (loaded through $SCHEMATHESIS_HOOKS).

Generated bodies name a random model, which only reaches the 404 of the model lookup; and
a schema-valid body may ask for 128 choices of thousands of tokens, minutes of the
engine on a small machine.  So a body that is a JSON object names the served model and
asks for little: every other field stays as generated, valid or not."""

from __future__ import annotations

import os

import schemathesis

MODEL = os.environ.get("TVB_FUZZ_MODEL", "vllm_model")
# Fields that set how much is generated, and the most each may ask for here.
SMALL = {"max_tokens": 8, "max_completion_tokens": 8, "max_output_tokens": 8, "n": 2,
         "best_of": 2, "top_logprobs": 2, "logprobs": 2}


@schemathesis.hook
def map_body(context, body):
    if isinstance(body, dict):
        body["model"] = MODEL
        for name, most in SMALL.items():
            value = body.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > most:
                body[name] = most
    return body

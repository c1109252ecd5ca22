"""Generate with vLLM's own offline `LLM`: the reference the served outputs must match.

    python offline_llm.py < {"engine_args": {...}, "prompts": [...], "sampling": {...}}

Prints `RESULT {"outputs": [{"text": ..., "token_ids": [...]}, ...]}` on stdout (vLLM logs
there too).
Run as a subprocess: vLLM's engine spawns processes and holds memory until exit.
"""

import json
import sys


def main() -> None:
    job = json.load(sys.stdin)
    from vllm import LLM, SamplingParams

    llm = LLM(**job["engine_args"])
    sampling = SamplingParams(**job["sampling"])
    results = llm.generate(job["prompts"], sampling, use_tqdm=False)
    outputs = [{"text": r.outputs[0].text, "token_ids": list(r.outputs[0].token_ids)}
               for r in results]
    print("RESULT " + json.dumps({"outputs": outputs}), flush=True)


if __name__ == "__main__":
    main()

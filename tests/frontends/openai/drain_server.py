"""`triton-openai`'s main() over the fake Triton, as a real process the drain tests signal.

    python drain_server.py PORT DELAY GRACE [FLAG...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from openai_fakes import FakeTokenizers, FakeTriton  # noqa: E402

import triton_openai.app  # noqa: E402
from triton_openai import cli  # noqa: E402


class SlowTriton(FakeTriton):
    """Takes `delay` per token for a complete answer too, before its one response."""

    async def stream_infer(self, model, inputs, outputs, request_id):
        import asyncio
        import json

        by_name = {t.name: t for t in inputs}
        sampling = json.loads(by_name["sampling_parameters"].as_strings()[0])
        first = True
        async for response in super().stream_infer(model, inputs, outputs, request_id):
            if first and response.final:
                await asyncio.sleep(self.delay * sampling.get("max_tokens", 16))
            first = False
            yield response


if __name__ == "__main__":
    port, delay, grace = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    fake = SlowTriton(delay=delay)
    real_build = triton_openai.app.build_app

    def build_with_fake(config, client=None):
        app = real_build(config, client=fake)
        app.state.completions.gen.tokenizers = FakeTokenizers()
        return app

    triton_openai.app.build_app = build_with_fake
    sys.exit(cli.main(["--host", "127.0.0.1", "--port", port, "--triton-metrics-url", "",
                       "--shutdown-timeout", grace, *sys.argv[4:]]))

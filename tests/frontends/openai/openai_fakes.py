"""A fake of the narrow Triton client interface, following the vLLM backend's contract."""

from __future__ import annotations

import asyncio
import json
import threading

from triton_openai.triton.client import (
    InferResponse,
    ModelInfo,
    Tensor,
    TritonError,
    deserialize_bytes,
)


class FakeTokenizer:
    """Whitespace tokenizer with a tiny Jinja chat template, enough to test the frontend's logic."""

    chat_template = (
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
        "{% if tools %}<|tools|>{{ tools | tojson }}\n{% endif %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")

    def encode(self, text, add_special_tokens=True):
        return [len(w) for w in text.split()]

    def decode(self, ids):
        return " ".join("x" * i for i in ids)

    def convert_ids_to_tokens(self, ids):
        return ["x" * i for i in ids]

    def __len__(self):
        return 100

    def apply_chat_template(self, messages, tools=None, chat_template=None, tokenize=False,
                            add_generation_prompt=True, continue_final_message=False, **kw):
        import jinja2

        return jinja2.Environment().from_string(chat_template or self.chat_template).render(
            messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, **kw)


class ThreadRecordingTokenizer(FakeTokenizer):
    """Counts the tokenizer's calls and the threads they ran on."""

    def __init__(self):
        self.threads: list[int] = []
        self.tokenized = 0

    def encode(self, text, add_special_tokens=True):
        self.threads.append(threading.get_ident())
        self.tokenized += 1
        return super().encode(text, add_special_tokens)


def event_loop_thread(client) -> int:
    """The thread of a TestClient's event loop, as a route served on it sees it."""
    seen = []

    @client.app.get("/loop-thread")
    async def _where():
        seen.append(threading.get_ident())
        return {}

    client.get("/loop-thread")
    return seen[0]


class FakeTokenizers:
    override = None

    def __init__(self, tok=None):
        self.tok = tok if tok is not None else FakeTokenizer()

    def get(self, path):
        return self.tok

    def loaded(self, path):
        return True, self.tok


def _inputs(inputs: list[Tensor]) -> dict:
    out = {}
    for t in inputs:
        if t.datatype == "BYTES":
            out[t.name] = [b.decode() for b in deserialize_bytes(t.data)]
        else:
            out[t.name] = t.as_list()
    return out


class FakeTriton:
    """Generates " w0 w1 w2 ..." (one word per token) up to max_tokens or `script`'s text."""

    def __init__(self, models=None, ready=True, script=None, delay=0.0):
        self.models = models if models is not None else [
            ModelInfo("llm", "1", True, {"vllm_model": "/nonexistent", "vllm_runner": "generate",
                                          "vllm_max_model_len": "64"}),
            ModelInfo("embed", "1", True, {"vllm_model": "/x", "vllm_runner": "pooling"}),
            ModelInfo("other", "1", True, {}),
        ]
        self.ready = ready
        self.script = script  # fixed list of token texts to "generate", or None
        self.delay = delay
        self.requests: list[dict] = []
        self.cancelled = 0
        self.closed = False
        self.fail: TritonError | None = None
        # The vLLM backend's health check: each model's answer (None: it can serve), given
        # after `health_delay` seconds; the models asked, in order.
        self.health: dict[str, TritonError | None] = {}
        self.health_delay = 0.0
        self.health_checks: list[str] = []
        self.health_cancelled = 0

    async def server_ready(self):
        return self.ready

    async def list_models(self):
        if not self.ready:
            raise TritonError("Triton: connection refused", 503)
        return self.models

    async def stream_infer(self, model, inputs, outputs, request_id):
        req = _inputs(inputs)
        req["model"], req["outputs"], req["request_id"] = model, outputs, request_id
        self.requests.append(req)
        if self.fail:
            raise self.fail
        if "embedding" in outputs:
            text = req.get("text_input", [""])[0]
            vec = [float(len(text)), 1.0, -0.5]
            yield InferResponse({
                "embedding": Tensor("embedding", "FP32", (3,), _f32(vec)),
                "num_input_tokens": Tensor.int64s("num_input_tokens", [len(text.split())])}, True)
            return
        sp = json.loads(req["sampling_parameters"][0])
        n = sp.get("n", 1)
        max_tokens = sp.get("max_tokens") or 16
        tokens = self.script or [f" w{i}" for i in range(1000)]
        produced = tokens[:max_tokens]
        reason = "length" if len(produced) < len(tokens) else "stop"
        n_in = len(req["input_ids"]) if "input_ids" in req else len(req["text_input"][0].split())
        stream = req["stream"][0]
        try:
            if stream:
                for i, tok in enumerate(produced):
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    last = i == len(produced) - 1
                    yield self._resp(n, [tok] * n, [reason if last else ""] * n, n_in, [1] * n,
                                     outputs, final=False, tokens=[tok])
                yield InferResponse({}, True)
            else:
                yield self._resp(n, ["".join(produced)] * n, [reason] * n, n_in,
                                 [len(produced)] * n, outputs, final=True, tokens=produced)
        except (GeneratorExit, asyncio.CancelledError):
            self.cancelled += 1
            raise

    async def model_health(self, model):
        self.health_checks.append(model)
        try:
            await asyncio.sleep(self.health_delay)
        except asyncio.CancelledError:
            self.health_cancelled += 1
            raise
        if self.health.get(model) is not None:
            raise self.health[model]

    def _resp(self, n, texts, reasons, n_in, counts, outputs, final, tokens):
        out = {
            "text_output": Tensor.bytes_("text_output", texts),
            "finish_reason": Tensor.bytes_("finish_reason", reasons),
            "num_input_tokens": Tensor.int64s("num_input_tokens", [n_in]),
            "num_output_tokens": Tensor.int64s("num_output_tokens", counts),
        }
        if "logprobs" in outputs:
            out["logprobs"] = Tensor.bytes_("logprobs", [json.dumps([
                {"id": 7, "token": t, "logprob": -0.5,
                 "top_logprobs": [{"id": 7, "token": t, "logprob": -0.5},
                                  {"id": 8, "token": "z", "logprob": -1.5}]}
                for t in tokens])] * n)
        return InferResponse(out, final)

    async def close(self):
        self.closed = True


def _f32(values):
    import struct

    return struct.pack(f"<{len(values)}f", *values)


class FeedingTriton(FakeTriton):
    """FakeTriton that also serves feeds as the vLLM backend does (its feed.py encodes the
    records): a request with the open parameter gets an empty response, then one response
    per step with the records of every stream sent on it; a stream sent on a feed gets an
    empty final response of its own.

    `steps`: streams of one step are sent together (a step's records, one response).
    `own_answers`: serve streams on their own responses even when they name a feed (a
    model instance without that feed).  `refuse_feeds`: answer opens with an error."""

    carries_feeds = True

    def __init__(self, *args, own_answers=False, refuse_feeds=None, drop_end=False, **kw):
        super().__init__(*args, **kw)
        self.own_answers = own_answers
        self.refuse_feeds = refuse_feeds
        self.drop_end = drop_end  # lose each stream's end record (a broken feed)
        self.feeds: dict[str, asyncio.Queue] = {}
        self.opens = 0
        self.fed_streams = 0
        self.parameters: list[dict] = []

    async def stream_infer(self, model, inputs, outputs, request_id, parameters=None):
        from triton_vllm_backend.stub import feed, wire

        parameters = parameters or {}
        self.parameters.append(parameters)
        opened = feed.open_request(parameters)
        if opened is not None:
            self.opens += 1
            if self.refuse_feeds is not None:
                raise self.refuse_feeds
            queue = self.feeds[opened] = asyncio.Queue()
            yield InferResponse({"text_output": Tensor.bytes_("text_output", [])}, False)
            while True:
                records = await queue.get()
                if records is None:  # the backend closes it (it carried nothing a while)
                    yield InferResponse({}, True)
                    return
                if isinstance(records, TritonError):  # unloaded, the engine died
                    raise records
                yield InferResponse({"text_output": Tensor.bytes_("text_output", records)},
                                    False)
        delivery = feed.delivery_of(parameters)
        if delivery is None or self.own_answers or delivery.feed_id not in self.feeds:
            async for response in super().stream_infer(model, inputs, outputs, request_id):
                yield response
            return
        self.fed_streams += 1
        queue = self.feeds[delivery.feed_id]
        text_tokens = []
        finish = None
        async for response in super().stream_infer(model, inputs, outputs, request_id):
            chunk_text = response.outputs.get("text_output")
            if chunk_text is None:
                continue
            text = chunk_text.as_strings()[0]
            finish = response.outputs["finish_reason"].as_strings()[0] or None
            text_tokens.append(text)
            queue.put_nowait([delivery.key, wire.FEED_DATA + delivery.template.event(text, finish)])
        req = self.requests[-1]
        n_in = len(req["input_ids"]) if "input_ids" in req else len(req["text_input"][0].split())
        if not self.drop_end:
            queue.put_nowait([delivery.key, feed.end_record(finish, n_in, len(text_tokens))])
        yield InferResponse({}, True)

    def end_feeds(self, error: TritonError | None = None):
        """Close every feed: with `error` as a failure, else as the backend closes an idle
        one."""
        for queue in self.feeds.values():
            queue.put_nowait(error)
        self.feeds.clear()

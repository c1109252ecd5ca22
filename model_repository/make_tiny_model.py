#!/usr/bin/env python3
"""Make the tiny random Llama model that tests, benchmarks and the sample image serve.

    python model_repository/make_tiny_model.py OUTDIR

The model is real as far as every serving component can tell (a `LlamaForCausalLM`
checkpoint, a byte-level BPE tokenizer, a chat template with system messages and tool
calls) but has random weights and needs no download.  Everything is seeded and written in
a fixed order, so the same script makes the same bytes on every run; caches key on a hash
of this file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Sizes the CPU attention kernels accept (head_dim 64; 16 is rejected), kept small so
# that vLLM loads the model in seconds on two cores.
HIDDEN_SIZE = 128
NUM_LAYERS = 2
NUM_HEADS = 2
INTERMEDIATE_SIZE = 256
MAX_POSITION_EMBEDDINGS = 2048
TARGET_VOCAB_SIZE = 1024
SEED = 1234

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>"]
SPECIAL_TOKENS = [BOS, EOS, PAD, *ROLE_TOKENS]

# A few sentences to train the tokenizer on: enough for common English pieces, JSON
# punctuation and digits, so that prompts in tests tokenize into several tokens.
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, my name is Triton and I serve large language models.",
    "The capital of France is Paris. The capital of Germany is Berlin.",
    "What is the weather like today? It is sunny with a few clouds.",
    "Inference servers batch requests from many clients at the same time.",
    "Paged attention keeps the key and value cache in fixed-size blocks.",
    "Once upon a time, in a land far away, there lived a small robot.",
    "Write a short poem about the sea, the wind and the stars.",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}',
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 32 64 128 256 512 1024 2048",
    "You are a helpful assistant. Answer the question as briefly as you can.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "Streaming responses send each new piece of text as soon as it is ready.",
    "The model generated tokens until it reached the maximum length or a stop word.",
]

# Jinja chat template (no incidental whitespace, so no trim markers): system message,
# user/assistant turns, tool definitions, assistant tool calls and tool results, and the
# generation prompt.  Tool calls are written as JSON objects so that a JSON tool-call
# parser can read what the model would produce.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}"
    "<|system|>\nYou can call these tools. To call one, answer with a JSON object "
    '{"name": ..., "arguments": {...}}.\n'
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}<|end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "<|system|>\n{{ message['content'] }}<|end|>\n"
    "{% elif message['role'] == 'user' %}"
    "<|user|>\n{{ message['content'] }}<|end|>\n"
    "{% elif message['role'] == 'assistant' %}"
    "<|assistant|>\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{% for call in message['tool_calls'] %}"
    "{% set fn = call['function'] if call['function'] is defined else call %}"
    '{"name": "{{ fn["name"] }}", "arguments": '
    "{% if fn['arguments'] is string %}{{ fn['arguments'] }}"
    "{% else %}{{ fn['arguments'] | tojson }}{% endif %}}"
    "{% endfor %}"
    "{% endif %}<|end|>\n"
    "{% elif message['role'] == 'tool' %}"
    "<|tool|>\n{{ message['content'] }}<|end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=TARGET_VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    return tokenizer


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def make_tiny_model(outdir) -> Path:
    """Write the tiny model into `outdir` (created if needed) and return its path."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(outdir).resolve()
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = _train_tokenizer()
    tokenizer.save(str(out / "tokenizer.json"))
    vocab_size = tokenizer.get_vocab_size()
    token_id = tokenizer.token_to_id

    _write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_POSITION_EMBEDDINGS,
        "chat_template": CHAT_TEMPLATE,
    })
    _write_json(out / "special_tokens_map.json", {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD})

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        head_dim=HIDDEN_SIZE // NUM_HEADS,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        bos_token_id=token_id(BOS),
        eos_token_id=token_id(EOS),
        pad_token_id=token_id(PAD),
        tie_word_embeddings=False,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    # Larger than default output weights give the random model peaked distributions, so
    # greedy decoding does not hinge on near-ties between logits.
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(SEED))
    model.save_pretrained(out, safe_serialization=True)
    # generation_config.json carries library versions; a fixed one keeps the bytes stable.
    _write_json(out / "generation_config.json", {
        "bos_token_id": token_id(BOS),
        "eos_token_id": token_id(EOS),
        "pad_token_id": token_id(PAD),
    })
    # save_pretrained writes the weights 0600; images run as a non-root user that must
    # read a model mounted from the host.
    for path in out.iterdir():
        path.chmod(0o644)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUTDIR", file=sys.stderr)
        return 2
    print(make_tiny_model(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

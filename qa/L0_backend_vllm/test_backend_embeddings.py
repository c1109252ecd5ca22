"""Embeddings from a pooling model: the real all-MiniLM-L6-v2 weights served by vLLM
through Triton, compared to sentence-transformers' vectors for the same sentences.  The
image's `serve` of the same folder is the README's own block (qa/L0_image)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from .vllm_suite import MINILM

# The suite's shared server serves the pooling model when its weights are installed.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600), pytest.mark.usefixtures("minilm")]

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Triton serves models over HTTP and gRPC.",
    "A sentence about the weather: it is sunny today.",
]


@pytest.fixture(scope="module")
def expected(minilm):
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(minilm), device="cpu")
    return model.encode(SENTENCES), model.tokenizer


def embed(server, **inputs) -> dict:
    response = httpx.post(f"{server.http_url}/v2/models/{MINILM}/generate", json=inputs,
                          timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_pooling_model_config(server):
    config = httpx.get(f"{server.http_url}/v2/models/{MINILM}/config").json()
    assert {o["name"] for o in config["output"]} == {"embedding", "num_input_tokens"}
    assert config["parameters"]["vllm_runner"]["string_value"] == "pooling"


def test_embeddings_match_sentence_transformers(server, expected):
    vectors, _ = expected
    for sentence, vector in zip(SENTENCES, vectors, strict=True):
        served = embed(server, text_input=sentence)["embedding"]
        assert len(served) == 384
        assert cosine(served, vector) > 0.999, sentence
    # Different sentences are told apart (the comparison above is not trivially true).
    assert cosine(embed(server, text_input=SENTENCES[0])["embedding"], vectors[1]) < 0.9


def test_embedding_of_token_ids(server, expected):
    vectors, tokenizer = expected
    ids = tokenizer(SENTENCES[1])["input_ids"]
    out = embed(server, input_ids=ids, return_num_input_tokens=True)
    assert out["num_input_tokens"] == len(ids)
    assert cosine(out["embedding"], vectors[1]) > 0.999


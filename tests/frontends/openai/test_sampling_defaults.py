"""Sampling defaults from generation_config.json, as vLLM's server applies them."""

import json

from openai_fakes import FakeTriton

from triton_openai import FrontendConfig
from triton_openai.served_models.sampling_defaults import read_defaults
from triton_openai.triton.client import ModelInfo


def _model_dir(tmp_path, config):
    (tmp_path / "generation_config.json").write_text(json.dumps(config))
    return FakeTriton(models=[ModelInfo("llm", "1", True, {
        "vllm_model": str(tmp_path), "vllm_runner": "generate", "vllm_max_model_len": "64"})])


def test_read_defaults_keeps_what_vllm_applies(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({
        "temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 5,
        "do_sample": True, "bos_token_id": 1}))
    assert read_defaults(str(tmp_path)) == {"temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                            "max_tokens": 5}
    assert read_defaults(str(tmp_path / "none")) == {}


def test_the_request_overrides_the_defaults_and_max_new_tokens_caps_the_budget(tmp_path,
                                                                              make_client):
    fake = _model_dir(tmp_path, {"temperature": 0.6, "top_k": 20, "max_new_tokens": 5})
    c = make_client(fake=fake)
    c.post("/v1/completions", json={"model": "llm", "prompt": "a", "temperature": 0.1})
    sent = json.loads(fake.requests[-1]["sampling_parameters"][0])
    assert (sent["temperature"], sent["top_k"], sent["max_tokens"]) == (0.1, 20, 5)
    c.post("/v1/chat/completions", json={"model": "llm", "max_tokens": 9,
                                         "messages": [{"role": "user", "content": "a"}]})
    sent = json.loads(fake.requests[-1]["sampling_parameters"][0])
    assert (sent["temperature"], sent["max_tokens"]) == (0.6, 9)


def test_generation_config_vllm_turns_them_off(tmp_path, make_client):
    fake = _model_dir(tmp_path, {"temperature": 0.6, "max_new_tokens": 5})
    c = make_client(FrontendConfig(triton_metrics_url=None, generation_config="vllm"), fake=fake)
    c.post("/v1/completions", json={"model": "llm", "prompt": "a"})
    sent = json.loads(fake.requests[-1]["sampling_parameters"][0])
    assert "temperature" not in sent and sent["max_tokens"] == 63

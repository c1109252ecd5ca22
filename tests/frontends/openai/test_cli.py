import argparse

import pytest

from triton_openai import FrontendConfig
from triton_openai.cli import build_parser, config_from_args


def test_entrypoint_flags(tmp_path, monkeypatch):
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    monkeypatch.setenv("TRITON_OPENAI_API_KEY", "k")
    args = build_parser().parse_args([
        "--triton-url", "localhost:8001", "--host", "0.0.0.0", "--port", "9000",
        "--served-model-name", "vllm_model=tiny", "--chat-template", str(template),
        "--cors-origins", "http://a, http://b", "--max-request-bytes", "1000",
        "--log-format", "json"])
    cfg = config_from_args(args)
    assert cfg.triton_url == "localhost:8001" and cfg.port == 9000
    assert cfg.api_key == "k"
    assert cfg.served_model_names == {"vllm_model": "tiny"}
    assert cfg.chat_template == "{{ messages }}"
    assert cfg.cors_origins == ["http://a", "http://b"]
    assert cfg.triton_metrics_url == "http://localhost:8002/metrics"


def test_bad_served_name():
    with pytest.raises(argparse.ArgumentTypeError, match="TRITON_MODEL=PUBLIC_NAME"):
        config_from_args(build_parser().parse_args(["--served-model-name", "nope"]))


def test_public_api():
    import triton_openai

    assert sorted(triton_openai.__all__) == ["FrontendConfig", "build_app", "main"]


def test_the_commands_defaults_are_the_configs(monkeypatch):
    monkeypatch.delenv("TRITON_OPENAI_API_KEY", raising=False)
    assert config_from_args(build_parser().parse_args([])) == FrontendConfig()

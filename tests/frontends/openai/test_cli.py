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
        "--served-model-name", "other=a,b", "--served-model-name", "other=c",
        "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
        "--generation-config", "vllm", "--compact-json",
        "--cors-origins", "http://a, http://b", "--max-request-bytes", "1000",
        "--log-format", "json", "--max-batch-inputs", "16",
        "--max-background-responses", "3"])
    cfg = config_from_args(args)
    assert (cfg.max_batch_inputs, cfg.max_background_responses) == (16, 3)
    assert cfg.triton_url == "localhost:8001" and cfg.port == 9000
    assert cfg.api_key == "k"
    assert cfg.served_model_names == {"vllm_model": ["tiny"], "other": ["a", "b", "c"]}
    assert (cfg.tool_call_parser, cfg.reasoning_parser) == ("hermes", "qwen3")
    assert cfg.generation_config == "vllm" and cfg.compact_json
    assert cfg.chat_template == "{{ messages }}"
    assert cfg.cors_origins == ["http://a", "http://b"]
    assert cfg.triton_metrics_url == "http://localhost:8002/metrics"


@pytest.mark.parametrize("value", ["nope", "m=", "m=a,,b"])
def test_bad_served_name(value):
    with pytest.raises(argparse.ArgumentTypeError, match="TRITON_MODEL=PUBLIC_NAME"):
        config_from_args(build_parser().parse_args(["--served-model-name", value]))


def test_a_generation_config_that_is_no_folder_is_refused():
    from triton_openai import build_app

    with pytest.raises(ValueError, match="--generation-config"):
        build_app(FrontendConfig(generation_config="/nonexistent"), client=object())


def test_public_api():
    import triton_openai

    assert sorted(triton_openai.__all__) == ["FrontendConfig", "build_app", "main"]


def test_the_commands_defaults_are_the_configs(monkeypatch):
    monkeypatch.delenv("TRITON_OPENAI_API_KEY", raising=False)
    assert config_from_args(build_parser().parse_args([])) == FrontendConfig()


@pytest.mark.parametrize("flag", ["--max-batch-inputs", "--max-background-responses"])
@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5"])
def test_a_bound_is_a_whole_number_above_0(flag, value, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([flag, value])
    assert f"argument {flag}: a whole number above 0, not '{value}'" in capsys.readouterr().err


def test_json_logs_are_one_object_a_line_with_the_traceback():
    import json
    import logging

    from triton_openai.cli import JsonFormatter

    try:
        raise RuntimeError("cannot open /srv/x")
    except RuntimeError as err:
        failed = logging.LogRecord("triton_openai", logging.ERROR, __file__, 1,
                                   "request %s: unexpected", ("abc",), (RuntimeError, err,
                                                                        err.__traceback__))
    forged = logging.LogRecord("triton_openai", logging.WARNING, __file__, 1,
                               '{"forged": true}\nnext', (), None)
    lines = [JsonFormatter().format(r) for r in (failed, forged)]
    assert all("\n" not in line for line in lines)
    first, second = (json.loads(line) for line in lines)
    assert first["message"] == "request abc: unexpected"
    assert "RuntimeError: cannot open /srv/x" in first["exception"]
    assert second == {"level": "warning", "logger": "triton_openai",
                      "message": '{"forged": true}\nnext'}


def test_the_keys_leave_the_environment_once_read():
    from triton_openai.cli import forget_keys

    environ = {"TRITON_OPENAI_API_KEY": "k", "TRITON_MODEL_CONTROL_KEY": "c", "PATH": "/bin"}
    forget_keys(environ)
    assert environ == {"PATH": "/bin"}


def _parser_from_the_table() -> argparse.ArgumentParser:
    """The command's flags rebuilt from option_table() with argparse's public API alone,
    as a command that hands them on to the frontend builds them."""
    from triton_openai.cli import option_table

    p = argparse.ArgumentParser()
    for o in option_table():
        common = {"dest": o.dest, "default": o.default, "help": o.help}
        if not o.takes_value:
            p.add_argument(*o.flags, action="store_const", const=o.const, **common)
        else:
            p.add_argument(*o.flags, action="append" if o.repeatable else "store",
                           nargs=o.nargs, type=o.type, choices=o.choices, metavar=o.metavar,
                           **common)
    return p


def test_the_option_table_describes_every_flag_but_help():
    from triton_openai.cli import option_table

    table = {flag: o for o in option_table() for flag in o.flags}
    assert "--help" not in table and "-h" not in table
    assert {"--api-key", "--tool-call-parser", "--compact-json", "--no-stream-feeds",
            "--served-model-name", "--max-batch-inputs"} <= set(table)
    switch, negation = table["--compact-json"], table["--no-stream-feeds"]
    assert (switch.takes_value, switch.const, switch.default) == (False, True, False)
    assert (negation.dest, negation.const) == ("stream_feeds", False)
    assert table["--served-model-name"].repeatable and not table["--api-key"].repeatable
    assert table["--tool-call-parser"].choices and "hermes" in table["--tool-call-parser"].choices


@pytest.mark.parametrize("argv", [
    [],
    ["--compact-json", "--no-stream-feeds", "--tool-call-parser", "hermes",
     "--max-batch-inputs", "16", "--timeout-keep-alive", "7", "--api-key", "k",
     "--served-model-name", "m=a", "--served-model-name", "n=b", "--log-format", "json"],
])
def test_a_parser_built_from_the_table_reads_flags_as_the_command_does(argv):
    assert vars(_parser_from_the_table().parse_args(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", [["--max-batch-inputs", "0"], ["--tool-call-parser", "nope"],
                                  ["--timeout-keep-alive", "soon"]])
def test_a_parser_built_from_the_table_refuses_what_the_command_refuses(argv, capsys):
    said = []
    for parser in (build_parser(), _parser_from_the_table()):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        said.append(capsys.readouterr().err.splitlines()[-1].split("error: ", 1)[1])
    assert said[0] == said[1]

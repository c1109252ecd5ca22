"""`serve`'s command line (triton_vllm_backend.serve), parsed by vLLM's real parser.

The sample repository in model_repository/ is the generator's output for the command
lines in SAMPLES: a change to either shows here as a diff.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from triton_vllm_backend import serve
from triton_vllm_backend.repository import repository_files

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_MODEL = "/opt/models/tiny-llama"     # where the image makes the sample model
SAMPLES = {
    "vllm_model": [SAMPLE_MODEL, "--served-model-name", "vllm_model", "--max-model-len", "2048",
                   "--enable-prefix-caching", "--enforce-eager"],
    "embedding_model": ["sentence-transformers/all-MiniLM-L6-v2", "--runner", "pooling",
                        "--served-model-name", "embedding_model"],
}


@pytest.fixture(autouse=True)
def online_hub(monkeypatch):
    """The hub reachable, whatever HF_HUB_OFFLINE says here (the samples name a hub id)."""
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture(scope="module")
def parser():
    return serve.build_parser()


@pytest.fixture
def model_dir(tmp_path):
    path = tmp_path / "tiny-llama"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def generated(argv, parser, model_dir):
    """The files for argv, with the sample model's image path standing for model_dir."""
    argv = [str(model_dir) if a == SAMPLE_MODEL else a for a in argv]
    spec, frontend = serve.parse_model(argv, parser)
    files = repository_files([spec])
    return {k: v.replace(str(model_dir), SAMPLE_MODEL) for k, v in files.items()}, frontend


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_sample_repository_is_the_generators_output(name, parser, model_dir):
    files, frontend = generated(SAMPLES[name], parser, model_dir)
    sample = REPO_ROOT / "model_repository"
    expected = {p.relative_to(sample).as_posix(): p.read_text()
                for p in sorted((sample / name).rglob("*")) if p.is_file()}
    assert files == expected
    assert frontend == []


def test_task_embed_is_runner_pooling(parser, model_dir):
    by_task, _ = generated([SAMPLE_MODEL, "--task", "embed"], parser, model_dir)
    by_runner, _ = generated([SAMPLE_MODEL, "--runner", "pooling"], parser, model_dir)
    assert by_task == by_runner
    assert json.loads(by_task["tiny-llama/1/model.json"])["runner"] == "pooling"


def test_engine_flags_go_to_model_json_and_frontend_flags_to_the_frontend(parser, model_dir,
                                                                         tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{{ messages }}")
    spec, frontend = serve.parse_model(
        [str(model_dir), "--tensor-parallel-size", "2", "--no-enable-prefix-caching",
         "--chat-template", str(template), "--tool-call-parser", "hermes",
         "--reasoning-parser", "deepseek_r1", "--api-key", "secret", "--compact-json"], parser)
    assert spec.name == "tiny-llama"
    assert spec.engine_args == {"model": str(model_dir), "tensor_parallel_size": 2,
                                "enable_prefix_caching": False,
                                "reasoning_parser": "deepseek_r1", "disable_log_stats": False}
    assert frontend == ["--chat-template", str(template), "--tool-call-parser", "hermes",
                        "--reasoning-parser", "deepseek_r1", "--api-key", "secret",
                        "--compact-json"]


def test_config_flags_keep_what_the_user_set(parser, model_dir):
    spec, _ = serve.parse_model([str(model_dir), "--compilation-config",
                                 '{"pass_config": {"eliminate_noops": false}}'], parser)
    assert spec.engine_args["compilation_config"] == {"pass_config": {"eliminate_noops": False}}


def test_served_model_names(parser, model_dir):
    spec, frontend = serve.parse_model([str(model_dir), "--served-model-name", "llm", "chat"],
                                       parser)
    assert spec.name == "llm" and "served_model_name" not in spec.engine_args
    assert frontend == ["--served-model-name", "llm=chat"]
    spec, frontend = serve.parse_model([str(model_dir), "--served-model-name", "org/llm"],
                                       parser)
    assert spec.name == "tiny-llama" and frontend == ["--served-model-name", "tiny-llama=org/llm"]


def test_disable_log_stats_turns_the_metrics_off(parser, model_dir):
    files, _ = generated([SAMPLE_MODEL, "--disable-log-stats"], parser, model_dir)
    assert json.loads(files["tiny-llama/1/model.json"])["disable_log_stats"] is True
    assert "REPORT_CUSTOM_METRICS" not in files["tiny-llama/config.pbtxt"]


@pytest.mark.parametrize("argv, message", [
    (["--bogus-flag", "1"], "serve: error: unrecognized arguments: --bogus-flag 1"),
    (["--max-model-len", "abc"],
     "serve: error: argument --max-model-len: invalid human_readable_int_or_auto value: 'abc'"),
    (["--tool-call-parser", "nope"], "serve: error: argument --tool-call-parser: invalid choice"),
    (["--port", "1"], "serve: error: unrecognized arguments: --port 1"),
])
def test_a_bad_flag_is_refused_with_the_parsers_message(argv, message, parser, model_dir, capsys):
    with pytest.raises(SystemExit) as e:
        serve.parse_model([str(model_dir), *argv], parser)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_not_a_model_folder(parser, tmp_path, model_dir):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("")
    cases = {str(tmp_path / "missing"): "no such model folder",
             str(tmp_path / "empty"): "not a model folder (no config.json or params.json in it)",
             str(tmp_path / "file"): "not a model folder (a file; serve takes the folder "
                                     "holding config.json)",
             "not-a-hub-id": "no such model folder"}
    for model, message in cases.items():
        with pytest.raises(serve.ServeError) as e:
            serve.parse_model([model], parser)
        assert str(e.value) == f"{model}: {message}"
    with pytest.raises(serve.ServeError, match="--chat-template /nope: no such file"):
        serve.parse_model([str(model_dir), "--chat-template", "/nope"], parser)


def test_a_models_file_serves_several(tmp_path, model_dir):
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  - path: {model_dir}\n    args: --max-model-len 512 "
                      f"--api-key k\n  - path: {model_dir}\n    args: [--runner, pooling, "
                      f"--served-model-name, embed, --api-key, k]\n")
    out = tmp_path / "out"
    assert serve.main([str(out), "--models", str(models)]) == 0
    repo = out / serve.REPOSITORY
    assert sorted(p.name for p in repo.iterdir()) == ["embed", "tiny-llama"]
    assert json.loads((repo / "embed/1/model.json").read_text())["runner"] == "pooling"
    assert (out / serve.FRONTEND_ARGS).read_bytes() == b""  # the key is not a flag there
    assert (out / serve.API_KEY_FILE).read_text() == "k"


@pytest.mark.parametrize("text, message", [
    ("models: []", "needs `models:`, a list of {path, args}"),
    ("models: [{path: /m, flags: x}]", "model 1 must be {path: FOLDER, args: FLAGS}"),
    ("models: [", "not valid YAML"),
    ("models: [{path: /m, args: false}]",
     "model 1's args must be a string, a list or a mapping, not false"),
    ("models: [{path: /m, args: 7}]",
     "model 1's args must be a string, a list or a mapping, not a number"),
    ("models: [{path: /m, args: [true, --enforce-eager]}]",
     "model 1's args has true where no flag comes before it (a switch is the flag alone: "
     "[--enforce-eager])"),
    ("models: [{path: /m, args: [--max-model-len, [1]]}]",
     "model 1's args must hold flags and values, not list"),
    ("models: [{path: /m, args: {max-model-len: null}}]",
     "model 1's args give max-model-len a value"),
])
def test_a_bad_models_file(tmp_path, text, message, capsys):
    models = tmp_path / "models.yaml"
    models.write_text(text)
    assert serve.main([str(tmp_path / "out"), "--models", str(models)]) == 2
    assert f"serve: error: --models {models}: {message}" in capsys.readouterr().err


def test_the_frontend_takes_one_value_per_flag(tmp_path, model_dir):
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  - path: {model_dir}\n    args: --api-key a\n"
                      f"  - path: {model_dir}\n    args: --api-key b --served-model-name x\n")
    with pytest.raises(serve.ServeError, match="--api-key is given twice with different values"):
        serve.parse(["--models", str(models)])


def test_main_writes_the_repository_and_the_frontends_flags(tmp_path, model_dir, capsys):
    out = tmp_path / "out"
    (out / serve.REPOSITORY / "stale").mkdir(parents=True)
    assert serve.main([str(out), str(model_dir), "--tool-call-parser", "hermes"]) == 0
    assert sorted(p.name for p in (out / serve.REPOSITORY).iterdir()) == ["tiny-llama"]
    assert (out / serve.FRONTEND_ARGS).read_bytes() == b"--tool-call-parser\0hermes\0"
    assert f"serve: {out}/model_repository/tiny-llama:" in capsys.readouterr().err


def test_every_boolean_flag_has_a_no_form(parser, model_dir):
    """vLLM's store_true flags get a --no- form: a generated models file writes any
    boolean setting as a flag."""
    spec, _ = serve.parse_model([str(model_dir), "--disable-log-stats",
                                 "--no-disable-log-stats", "--no-aggregate-engine-logging"],
                                parser)
    assert spec.engine_args == {"model": str(model_dir), "disable_log_stats": False}


def test_no_disable_log_stats_publishes_a_pooling_models_statistics(parser, model_dir):
    quiet, _ = generated([SAMPLE_MODEL, "--runner", "pooling"], parser, model_dir)
    assert "REPORT_CUSTOM_METRICS" not in quiet["tiny-llama/config.pbtxt"]
    files, _ = generated([SAMPLE_MODEL, "--runner", "pooling", "--no-disable-log-stats"],
                         parser, model_dir)
    assert json.loads(files["tiny-llama/1/model.json"]) == {
        "model": SAMPLE_MODEL, "runner": "pooling", "disable_log_stats": False}
    assert 'key: "REPORT_CUSTOM_METRICS"' in files["tiny-llama/config.pbtxt"]


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """HF_HUB_OFFLINE set, and a Hugging Face cache holding org/cached (as the hub client
    lays it out: refs/main names the snapshot)."""
    from huggingface_hub import constants
    cache = tmp_path / "hub"
    repo = cache / "models--org--cached"
    (repo / "snapshots/abc").mkdir(parents=True)
    (repo / "snapshots/abc/config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs/main").write_text("abc")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_offline_a_hub_id_must_be_in_the_cache(offline_hub, parser):
    spec, _ = serve.parse_model(["org/cached"], parser)
    assert spec.engine_args["model"] == "org/cached"
    with pytest.raises(serve.ServeError) as e:
        serve.parse_model(["org/missing"], parser)
    assert str(e.value) == (
        f"org/missing: no such model folder, and HF_HUB_OFFLINE is set but the Hugging Face "
        f"cache ({offline_hub}) does not hold this hub id: download it there first, give its "
        f"folder, or set HF_HUB_OFFLINE=0 for vLLM to download it")


def test_online_a_hub_id_is_left_to_vllm(parser):
    spec, _ = serve.parse_model(["org/anything"], parser)
    assert spec.engine_args["model"] == "org/anything"


# --- a models file's switches, as vLLM's own --config file reads them ------------------

@pytest.mark.parametrize("args, flags", [
    ("--max-model-len 512 --enforce-eager", ["--max-model-len", "512", "--enforce-eager"]),
    ([], []),
    (None, []),
    (["--max-model-len", 512, "--enforce-eager", True], ["--max-model-len", "512",
                                                         "--enforce-eager"]),
    (["--enforce-eager", False], [serve._Negated("--enforce-eager")]),
    ({"max-model-len": 512, "--enforce-eager": True, "enable-prefix-caching": False,
      "served-model-name": ["a", "b"], "compilation-config": {"level": 0}, "allowed": []},
     ["--max-model-len", "512", "--enforce-eager", serve._Negated("--enable-prefix-caching"),
      "--served-model-name", "a", "b", "--compilation-config", '{"level": 0}']),
])
def test_a_models_files_args_become_flags(args, flags):
    assert serve._model_args(args) == flags


def test_true_is_the_bare_flag_and_false_its_no_form_or_nothing(tmp_path, model_dir):
    """`true` never reaches vLLM as the word "True", nor is `false` dropped."""
    models = tmp_path / "models.yaml"
    models.write_text(
        f"models:\n"
        f"  - path: {model_dir}\n"
        f"    args: {{enforce-eager: true, enable-prefix-caching: false, max-model-len: 64}}\n"
        f"  - path: {model_dir}\n"
        f"    args: [--served-model-name, b, --enforce-eager, false, --no-such-switch, false]\n")
    served = serve.parse(["--models", str(models)])
    a, b = (spec.engine_args for spec in served.specs)
    assert (a["enforce_eager"], a["enable_prefix_caching"], a["max_model_len"]) == (
        True, False, 64)
    # --no-enforce-eager is serve's own negation (vLLM's store_true has none); a flag with
    # no --no- form set to false is left out, as vLLM's --config file leaves it out.
    assert "enforce_eager" not in b and served.frontend == []


# --- the API key stays off command lines and out of files others can read --------------

@pytest.mark.parametrize("flag", [["--api-key", "s3cret"], ["--api-key=s3cret"]])
def test_the_api_key_goes_to_a_file_only_its_owner_reads(tmp_path, model_dir, flag,
                                                        monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    old_umask = os.umask(0)  # the mode is the file's own, whatever the umask
    # Made with its mode, never chmod-ed after: no moment in which others could read it.
    monkeypatch.setattr(os, "chmod", None)
    monkeypatch.setattr(os, "fchmod", None)
    try:
        assert serve.main([str(out), str(model_dir), "--tool-call-parser", "hermes",
                           *flag]) == 0
    finally:
        os.umask(old_umask)
    assert (out / serve.FRONTEND_ARGS).read_bytes() == b"--tool-call-parser\0hermes\0"
    key = out / serve.API_KEY_FILE
    assert key.read_text() == "s3cret"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_run_without_a_key_removes_an_earlier_runs_and_follows_no_link(tmp_path,
                                                                        model_dir):
    out = tmp_path / "out"
    assert serve.main([str(out), str(model_dir), "--api-key", "old"]) == 0
    assert serve.main([str(out), str(model_dir)]) == 0
    assert not (out / serve.API_KEY_FILE).exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("untouched")
    (out / serve.API_KEY_FILE).symlink_to(elsewhere)
    assert serve.main([str(out), str(model_dir), "--api-key", "new"]) == 0
    assert elsewhere.read_text() == "untouched"
    assert not (out / serve.API_KEY_FILE).is_symlink()
    assert (out / serve.API_KEY_FILE).read_text() == "new"


def test_models_that_agree_on_the_key_share_it(tmp_path, model_dir):
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  - path: {model_dir}\n    args: --api-key k\n"
                      f"  - path: {model_dir}\n    args: [--served-model-name, x]\n")
    served = serve.parse(["--models", str(models)])
    assert served.api_key == "k" and serve.API_KEY_FLAG not in served.frontend


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_exits_with_its_own_status_and_writes_nothing(tmp_path, model_dir, flag, capsys):
    """Not 0: the image's entrypoint starts the servers after a serve that succeeded."""
    out = tmp_path / "out"
    assert serve.main([str(out), flag]) == serve.EXIT_HELP_ONLY
    assert serve.main([str(out), str(model_dir), "--max-model-len", "64", flag]) == \
        serve.EXIT_HELP_ONLY
    assert "usage: serve MODEL" in capsys.readouterr().out
    assert not out.exists()



def test_stream_interval_is_vllms_engine_flag(parser, model_dir):
    """vLLM's --stream-interval is an engine argument: its engine streams at least that
    many tokens a response, whatever interval the backend asks for (coalesce.py)."""
    files, frontend = generated([SAMPLE_MODEL, "--stream-interval", "13"], parser, model_dir)
    assert json.loads(files["tiny-llama/1/model.json"])["stream_interval"] == 13
    assert frontend == []

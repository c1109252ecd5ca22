import json

import pytest
from triton_vllm_backend.stub import engine_config
from triton_vllm_backend.stub.engine_config import (
    ConfigError,
    bool_setting,
    check_devices,
    check_keys,
    check_published,
    load_model_json,
    published_parameters,
    resolve_paths,
    runner_of,
)
from triton_vllm_backend.stub.lora import UnknownAdapter, adapter_id, load_adapters
from triton_vllm_backend.stub.lora import check_published as check_lora_published

KNOWN = {"model", "max_model_len", "tensor_parallel_size", "pipeline_parallel_size",
         "runner", "enable_lora", "dtype", "tokenizer"}


def test_load_model_json(tmp_path):
    with pytest.raises(ConfigError, match="model.json: no such file"):
        load_model_json(tmp_path)
    (tmp_path / "model.json").write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_model_json(tmp_path)
    (tmp_path / "model.json").write_text('{"max_model_len": 5}')
    with pytest.raises(ConfigError, match="'model'"):
        load_model_json(tmp_path)
    (tmp_path / "model.json").write_text('{"model": "org/name"}')
    assert load_model_json(tmp_path) == {"model": "org/name"}


def test_unknown_keys_are_named_with_a_suggestion():
    check_keys({"model": "m", "max_model_len": 8}, KNOWN)
    with pytest.raises(ConfigError, match="unknown engine argument 'max_modle_len' "
                                          r"\(did you mean 'max_model_len'\?\)"):
        check_keys({"model": "m", "max_modle_len": 8}, KNOWN)


def test_parallelism_over_several_gpus_needs_kind_model():
    check_devices({"tensor_parallel_size": 2}, "MODEL")
    check_devices({"tensor_parallel_size": 1}, "GPU")
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        with pytest.raises(ConfigError, match=f"'{key}' is 2.*KIND_GPU.*KIND_MODEL"):
            check_devices({key: 2}, "GPU")
    with pytest.raises(ConfigError, match="must be an integer"):
        check_devices({"tensor_parallel_size": "two"}, "GPU")


def test_local_paths_must_exist_and_may_be_relative(tmp_path):
    (tmp_path / "weights").mkdir()
    assert resolve_paths({"model": "./weights"}, tmp_path)["model"] == str(tmp_path / "weights")
    assert resolve_paths({"model": "org/name"}, tmp_path) == {"model": "org/name"}
    with pytest.raises(ConfigError, match="'tokenizer' names /no/such/dir"):
        resolve_paths({"model": "org/name", "tokenizer": "/no/such/dir"}, tmp_path)


def test_runner_and_published_parameters():
    assert runner_of({"model": "m"}) == "generate"
    assert runner_of({"model": "m", "runner": "pooling"}) == "pooling"
    assert published_parameters({"model": "m", "max_model_len": 64}) == {
        "vllm_model": "m", "vllm_runner": "generate", "vllm_max_model_len": "64"}
    args = {"model": "m", "runner": "pooling"}
    check_published({"vllm_model": {"string_value": "m"}, "other": {"string_value": "x"}}, args)
    with pytest.raises(ConfigError, match="'vllm_runner' is 'generate'.*says 'pooling'"):
        check_published({"vllm_runner": {"string_value": "generate"}}, args)
    with pytest.raises(ConfigError, match="does not set it"):
        check_published({"vllm_max_model_len": {"string_value": "5"}}, args)


def test_switches_from_parameters_or_environment():
    assert bool_setting({"X": {"string_value": "true"}}, "X", env={})
    assert not bool_setting({"X": {"string_value": "no"}}, "X", env={"X": "1"})
    assert bool_setting({}, "X", env={"X": "1"})
    assert not bool_setting({}, "X", env={})
    assert bool_setting({}, "X", env={}, default=True)
    assert not bool_setting({"X": {"string_value": "false"}}, "X", env={}, default=True)


def test_lora_adapters(tmp_path):
    assert load_adapters(tmp_path, enable_lora=False) == {}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "adapter_config.json").write_text("{}")
    (tmp_path / "multi_lora.json").write_text(json.dumps({"sql": "./a"}))
    with pytest.raises(ConfigError, match='"enable_lora": true'):
        load_adapters(tmp_path, enable_lora=False)
    adapters = load_adapters(tmp_path, enable_lora=True)
    assert adapter_id(adapters, "sql") == (1, (tmp_path / "a").resolve())
    with pytest.raises(UnknownAdapter, match=r"unknown LoRA adapter 'x' \(this model serves: sql\)"):
        adapter_id(adapters, "x")
    (tmp_path / "multi_lora.json").write_text(json.dumps({"chat": "./missing"}))
    with pytest.raises(ConfigError, match="adapter 'chat'"):
        load_adapters(tmp_path, enable_lora=True)


def test_published_lora_names_must_match_the_adapters(tmp_path):
    adapters = {"sql": tmp_path / "sql", "chat": tmp_path / "chat"}

    def published(value):
        return {"vllm_lora_names": {"string_value": value}}

    check_lora_published({}, adapters)  # not published: nothing to check
    check_lora_published(published("sql, chat"), adapters)  # any order, spaces allowed
    for stale in ("sql", "sql,chat,extra", "sql,sql"):
        with pytest.raises(ConfigError, match=r"'vllm_lora_names' is .*serves: chat, sql"):
            check_lora_published(published(stale), adapters)
    with pytest.raises(ConfigError, match="serves: no adapters"):
        check_lora_published(published("sql"), {})


# -- each KIND_GPU instance its own GPU --------------------------------------------------
@pytest.mark.parametrize("kind,device,env,expected", [
    ("GPU", 1, {}, {"CUDA_VISIBLE_DEVICES": "1"}),
    ("KIND_GPU", "0", {}, {"CUDA_VISIBLE_DEVICES": "0"}),
    ("GPU", 1, {"CUDA_VISIBLE_DEVICES": "4,6"}, {"CUDA_VISIBLE_DEVICES": "6"}),
    ("MODEL", 0, {}, {}),
    ("CPU", 0, {}, {}),
    ("GPU", -1, {}, {}),
])
def test_instance_device_env(kind, device, env, expected):
    assert engine_config.instance_device_env(kind, device, env) == expected


def test_instance_device_env_rejects_an_unseen_gpu():
    with pytest.raises(engine_config.ConfigError, match="not among CUDA_VISIBLE_DEVICES=4,6"):
        engine_config.instance_device_env("GPU", 2, {"CUDA_VISIBLE_DEVICES": "4,6"})


def test_cpu_engines_get_the_amx_worker_hook():
    args = {"model": "m", "enable_lora": True}
    assert engine_config.with_amx_worker(args, on_cpu=True) == {
        **args, "worker_extension_cls": engine_config.AMX_WORKER_EXTENSION}
    assert "worker_extension_cls" not in args  # the caller's dict is left as it was
    assert engine_config.with_amx_worker(args, on_cpu=False) == args
    own = {**args, "worker_extension_cls": "mine.Extension"}
    assert engine_config.with_amx_worker(own, on_cpu=True) == own


def test_the_amx_hook_names_the_class_vllm_imports():
    pytest.importorskip("torch")
    from triton_vllm_backend.stub import amx_worker

    assert engine_config.AMX_WORKER_EXTENSION == amx_worker.QUALNAME
    # vLLM refuses an extension whose attributes clash with its worker's.
    assert [a for a in dir(amx_worker.AmxPermission) if not a.startswith("__")] == []

"""modelRepository.source=values: the chart writes `models` as a models file for the
image's `serve`, which makes the model repository when the pod starts.  Here that file
goes through serve's real parser (vLLM's own) and generator, the ones `docker run IMAGE
serve` and `build.py --serve-model` use: one generator for all three."""
from __future__ import annotations

import json
import re

import pytest
import yaml
from triton_vllm_backend import serve
from triton_vllm_backend.repository import repository_files
from triton_vllm_backend.stub import engine_config

from qa.common import chart

MODELS_FILE = "/etc/triton-vllm/models.yaml"
QA_VALUES = chart.REPO_ROOT / "qa/L0_helm/values-models.yaml"

# What the chart wrote for its CI values when it templated each config.pbtxt and
# model.json itself: the repository serve must make from the models file now.
METRICS = {"REPORT_CUSTOM_METRICS": "true"}
BEFORE = {
    "gpu-tp": {"llama": (
        {"vllm_model": "meta-llama/Llama-3.1-8B-Instruct", "vllm_runner": "generate",
         "vllm_max_model_len": "8192", **METRICS},
        {"model": "meta-llama/Llama-3.1-8B-Instruct", "disable_log_stats": False,
         "max_model_len": 8192, "tensor_parallel_size": 2, "pipeline_parallel_size": 1,
         "gpu_memory_utilization": 0.9, "enable_prefix_caching": True})},
    "pvc-cache": {
        "mistral": (
            {"vllm_model": "/cache/models/mistral", "vllm_runner": "generate",
             "vllm_max_model_len": "4096", **METRICS},
            {"model": "/cache/models/mistral", "disable_log_stats": False, "max_model_len": 4096,
             "tensor_parallel_size": 1, "pipeline_parallel_size": 1}),
        "minilm": (
            {"vllm_model": "/cache/models/minilm", "vllm_runner": "pooling", **METRICS},
            {"model": "/cache/models/minilm", "disable_log_stats": False, "runner": "pooling",
             "tensor_parallel_size": 1, "pipeline_parallel_size": 1})},
    "multi-node": {"llama-405b": (
        {"vllm_model": "meta-llama/Llama-3.1-405B-Instruct", "vllm_runner": "generate",
         **METRICS},
        {"model": "meta-llama/Llama-3.1-405B-Instruct", "disable_log_stats": False,
         "tensor_parallel_size": 8, "pipeline_parallel_size": 2,
         "nnodes": 2, "master_port": 29500})},
    "qa-models": {"tiny": (
        {"vllm_model": "/opt/models/tiny-llama", "vllm_runner": "generate",
         "vllm_max_model_len": "1024", **METRICS},
        {"model": "/opt/models/tiny-llama", "disable_log_stats": False, "max_model_len": 1024,
         "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
         "enable_prefix_caching": True, "enforce_eager": True})},
}


def values_file(fixture: str):
    return QA_VALUES if fixture == "qa-models" else chart.CHART / "ci" / f"{fixture}-values.yaml"


def models_file(manifests: list[dict]) -> dict:
    return yaml.safe_load(chart.find(manifests, "ConfigMap")["data"]["models.yaml"])


def served(manifests: list[dict], tmp_path) -> tuple[dict[str, tuple[dict, dict]], list[str]]:
    """What serve makes of the chart's models file: {name: (config.pbtxt parameters,
    model.json)} and the frontend's flags.  Each folder in the pod is a model folder
    under tmp_path here, named by its pod path again in what comes out."""
    models = models_file(manifests)["models"]
    pod_paths = {}
    for entry in models:
        if entry["path"].startswith("/"):
            folder = tmp_path / entry["path"].lstrip("/")
            folder.mkdir(parents=True)
            (folder / "config.json").write_text("{}")
            pod_paths[str(folder)] = entry["path"]
            entry["path"] = str(folder)
    here = tmp_path / "models.yaml"
    here.write_text(yaml.safe_dump({"models": models}))
    made = serve.parse(["--models", str(here)])
    out = {}
    for rel, text in repository_files(made.specs).items():
        for folder, pod_path in pod_paths.items():
            text = text.replace(folder, pod_path)
        name, _, file = rel.partition("/")
        pbtxt, model_json = out.get(name, ({}, {}))
        if file == "config.pbtxt":
            pbtxt = dict(re.findall(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}', text))
        else:
            model_json = json.loads(text)
        out[name] = (pbtxt, model_json)
    return out, made.frontend


@pytest.fixture(autouse=True)
def online_hub(monkeypatch):
    """The models' hub ids are left to vLLM, whatever HF_HUB_OFFLINE says on this host."""
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def vllm_default(key: str):
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs
    return next(f.default for f in dataclasses.fields(AsyncEngineArgs) if f.name == key)


@pytest.mark.parametrize("fixture", sorted(BEFORE))
def test_serve_makes_the_repository_the_chart_wrote(fixture, tmp_path):
    """The same config.pbtxt parameters, and model.json's keys but those that held vLLM's
    default (serve writes only what differs from it)."""
    repository, frontend = served(chart.render([values_file(fixture)]), tmp_path)
    assert sorted(repository) == sorted(BEFORE[fixture])
    assert frontend == []
    for name, (params, model_json) in repository.items():
        params_before, json_before = BEFORE[fixture][name]
        assert params == params_before, name
        engine_config.check_published(params, model_json)  # as the backend's load does
        assert model_json.items() <= json_before.items(), name
        for key in json_before.keys() - model_json.keys():
            assert json_before[key] == vllm_default(key), (name, key)


def test_engine_args_reach_model_json_as_flags(tmp_path):
    """Each kind of value: a number (an integer in any size), a boolean either way, an
    object, a list; an engine argument wins over the value it duplicates."""
    engine_args = {"gpu_memory_utilization": 0.5, "max_num_batched_tokens": 1000000,
                   "enforce_eager": True, "enable_prefix_caching": False,
                   "hf_overrides": {"rope_theta": 1000000.0}, "max_model_len": 256,
                   "ignore_patterns": ["*.pt", "original/*"], "seed": None}
    manifests = chart.render(values={"modelRepository": {"source": "values"}, "models": [
        {"name": "m", "model": "/models/m", "maxModelLen": 128, "engineArgs": engine_args}]})
    (_, model_json), = served(manifests, tmp_path)[0].values()
    assert model_json == {"model": "/models/m", "disable_log_stats": False,
                          **{k: v for k, v in engine_args.items() if v is not None}}


def test_disable_log_stats_turns_the_metrics_off(tmp_path):
    manifests = chart.render(values={"modelRepository": {"source": "values"}, "models": [
        {"name": "m", "model": "/models/m", "engineArgs": {"disable_log_stats": True}}]})
    (params, model_json), = served(manifests, tmp_path)[0].values()
    assert model_json["disable_log_stats"] is True and "REPORT_CUSTOM_METRICS" not in params


def test_an_unknown_engine_argument_is_refused_by_vllms_parser(tmp_path, capsys):
    manifests = chart.render(values={"modelRepository": {"source": "values"}, "models": [
        {"name": "m", "model": "/models/m", "engineArgs": {"gpu_memory_utilisation": 0.5}}]})
    with pytest.raises(SystemExit):
        served(manifests, tmp_path)
    assert "unrecognized arguments: --gpu-memory-utilisation 0.5" in capsys.readouterr().err


def _server(manifests: list[dict]) -> tuple[dict, dict]:
    workload = next(m for m in manifests if m["kind"] in ("Deployment", "StatefulSet")
                    and m["metadata"]["labels"]["app.kubernetes.io/component"] == "server")
    spec = workload["spec"]["template"]["spec"]
    return spec, next(c for c in spec["containers"] if c["name"] == "triton")


def test_the_pod_runs_serve_on_the_mounted_models_file():
    manifests = chart.render([values_file("gpu-tp")])
    spec, triton = _server(manifests)
    assert triton["args"] == ["serve", "--models", MODELS_FILE, "--",
                              "--model-control-mode=explicit", "--load-model=*"]
    volume = next(v for v in spec["volumes"] if v["name"] == "model-repository")
    assert volume["configMap"]["items"] == [{"key": "models.yaml", "path": "models.yaml"}]
    mount = next(m for m in triton["volumeMounts"] if m["name"] == "model-repository")
    assert f"{mount['mountPath']}/models.yaml" == MODELS_FILE and mount["readOnly"]
    env = {e["name"]: e.get("value") for e in triton["env"]}
    # serve's repository, not a mounted one.
    assert "MODEL_REPOSITORY" not in env
    assert env["HF_HOME"] == "/cache/huggingface"


@pytest.mark.parametrize(("fixture", "downloads"), [
    ("gpu-tp", True), ("multi-node", True), ("pvc-cache", False), ("qa-models", False)])
def test_only_a_hub_id_takes_the_image_online(fixture, downloads):
    """The image is offline (HF_HUB_OFFLINE=1, and serve refuses a hub id the cache
    lacks): a model named by its hub id is downloaded by vLLM; a fetched one or a path
    needs no hub."""
    manifests = chart.render([values_file(fixture)])
    if fixture == "multi-node":
        lws = chart.find(manifests, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
        triton = lws["leaderTemplate"]["spec"]["containers"][0]
    else:
        triton = _server(manifests)[1]
    env = {e["name"]: e.get("value") for e in triton["env"]}
    assert env.get("HF_HUB_OFFLINE") == ("0" if downloads else None)

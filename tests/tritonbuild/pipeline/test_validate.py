import dataclasses
from pathlib import Path

import pytest

from tritonbuild import pins
from tritonbuild.errors import (
    ConflictError,
    MalformedValueError,
    UnknownValueError,
    UnsupportedError,
    UsageError,
    ValidationError,
)
from tritonbuild.pipeline.flags import parse_flags
from tritonbuild.pipeline.plan import FEATURES, Backend, BuildPlan, Sourced
from tritonbuild.pipeline.validate import RESOLVERS, Resolution, resolve_features, resolve_tag


def test_defaults(plan_for, host):
    plan = plan_for()
    assert plan.flavor.value == "cpu" and plan.flavor.source == "default"
    assert [b.name for b in plan.backends.value] == ["vllm", "python"]
    assert plan.endpoints.value == ("http", "grpc")
    assert plan.base_image.value == pins.get("base.cpu_image")
    assert plan.vllm_package.value == pins.get("vllm.cpu_package")
    assert plan.vllm_version.value == pins.get("vllm.cpu_version")
    assert plan.wheelhouse.value == host.find_links and plan.wheelhouse.source == "host"
    assert [s.id for s in plan.secrets.value] == ["pip_cert"] and plan.secrets.source == "host"
    assert plan.tag.value == f"tritonserver-vllm:{pins.get('triton.upstream_container_version')}-cpu"
    assert any("implies --backend=python" in n for n in plan.notes)


# Every flag changes the plan in a way a test can see: (flags, field, value, source).
# A model folder (config.json only) for --serve-model.
MY_LLM = Path(__file__).parents[1] / "data" / "my-llm"
CHANGES = [
    (["--backend=python"], "backends", (Backend("python"),), "flag"),
    (["--backend=ensemble", "--backend=vllm"], "backends",
     (Backend("ensemble"), Backend("vllm"), Backend("python")), "flag"),
    (["--backend=vllm:r24.10"], "backends", (Backend("vllm", "r24.10"), Backend("python")), "flag"),
    (["--backend=vllm:0.31.0"], "vllm_version", "0.31.0", "flag"),
    (["--endpoint=http"], "endpoints", ("http",), "flag"),
    (["--endpoint=grpc"], "endpoints", ("grpc",), "flag"),
    (["--endpoint=openai"], "endpoints", ("http", "grpc", "openai"), "flag"),
    (["--endpoint=http", "--endpoint=openai"], "endpoints", ("http", "openai"), "flag"),
    (["--endpoint=grpc", "--endpoint=openai"], "endpoints", ("grpc", "openai"), "flag"),
    (["--endpoint=sagemaker"], "endpoints", ("http", "grpc", "sagemaker"), "flag"),
    (["--endpoint=vertex-ai"], "endpoints", ("http", "grpc", "vertex-ai"), "flag"),
    (["--filesystem=s3", "--filesystem=gcs"], "filesystems", ("s3", "gcs"), "flag"),
    (["--filesystem=azure_storage"], "filesystems", ("azure_storage",), "flag"),
    (["--enable-logging"], "logging", True, "flag"),
    (["--enable-stats"], "stats", True, "flag"),
    (["--enable-tracing"], "tracing", True, "flag"),
    (["--enable-metrics"], "metrics", True, "flag"),
    # An OpenAI image serves the gauges its chart scales and alerts on, unless told not to.
    (["--backend=vllm", "--endpoint=openai"], "metrics", True, "implied"),
    (["--backend=vllm", "--endpoint=openai", "--disable-metrics"], "metrics", False, "flag"),
    (["--enable-metrics", "--enable-cpu-metrics"], "cpu_metrics", True, "flag"),
    (["--enable-gpu", "--enable-metrics", "--enable-gpu-metrics"], "gpu_metrics", True, "flag"),
    (["--enable-gpu"], "flavor", "gpu", "flag"),
    (["--enable-gpu"], "base_image", "nvcr.io/nvidia/tritonserver:25.11-py3", "default"),
    (["--enable-gpu"], "vllm_version", "0.11.0", "default"),
    (["--enable-gpu"], "python_version", "3.12", "default"),
    (["--enable-gpu"], "numpy_below_2", False, "default"),
    (["--enable-gpu", "--vllm-version=0.12.0"], "constraints", None, "default"),
    (["--enable-gpu", "--upstream-container-version=26.08"], "vllm_version", "0.27.1",
     "default"),
    (["--enable-gpu", "--upstream-container-version=25.05", "--vllm-version=0.9.2"],
     "python_version", "3", "default"),
    (["--enable-gpu"], "vllm_package", "vllm", "default"),
    (["--enable-all"], "flavor", "gpu", "implied"),
    (["--enable-all"], "filesystems", ("gcs", "s3", "azure_storage"), "implied"),
    (["--enable-all"], "endpoints", ("http", "grpc", "sagemaker", "vertex-ai"), "implied"),
    (["--enable-gpu", "--upstream-container-version=26.08"], "base_image",
     "nvcr.io/nvidia/tritonserver:26.08-py3", "default"),
    (["--upstream-container-version=24.10"], "upstream_container_version", "24.10", "flag"),
    (["--container-version=1.2.3"], "container_version", "1.2.3", "flag"),
    (["--container-version=1.2.3"], "tag", "tritonserver-vllm:1.2.3-cpu", "default"),
    (["--image=base,my/debian:12"], "base_image", "my/debian:12", "flag"),
    (["--image=base,my/debian:12"], "inference_image", "my/debian:12", "implied"),
    (["--image=inference,my/run:1"], "inference_image", "my/run:1", "flag"),
    (["--enable-gpu", "--image=gpu-base,my/triton:1"], "inference_image", "my/triton:1", "implied"),
    (["--build-dir=/tmp/elsewhere"], "build_dir", Path("/tmp/elsewhere"), "flag"),
    (["--dryrun"], "dryrun", True, "flag"),
    (["-v"], "progress", "plain", "flag"),
    (["-q"], "progress", "quiet", "flag"),
    (["--tag=me/triton:dev"], "tag", "me/triton:dev", "flag"),
    (["--pip-index-url=https://pypi.example/simple"], "pip_index_url",
     "https://pypi.example/simple", "flag"),
    (["--pip-extra-index-url=https://a/simple", "--pip-extra-index-url=https://b/simple"],
     "pip_extra_index_urls", ("https://a/simple", "https://b/simple"), "flag"),
    (["--wheelhouse=none", "--pip-extra-index-url=https://download.pytorch.org/whl/cpu"],
     "wheelhouse", None, "flag"),
    (["--no-cache"], "no_cache", True, "flag"),
    (["--vllm-version=0.31.1"], "vllm_version", "0.31.1", "flag"),
    ([f"--serve-model={MY_LLM}"], "serve_model", MY_LLM, "flag"),
    ([f"--serve-model={MY_LLM}",
      "--serve-model-args=--max-model-len 64 --served-model-name 'a b'"],
     "serve_model_args", ("--max-model-len", "64", "--served-model-name", "a b"), "flag"),
]


@pytest.mark.parametrize("argv,field,value,source", CHANGES,
                         ids=[" ".join(c[0]) for c in CHANGES])
def test_flag_changes_plan(plan_for, argv, field, value, source):
    changed = getattr(plan_for(*argv), field)
    assert (changed.value, changed.source) == (value, source)


SOURCED_FIELDS = {f.name for f in dataclasses.fields(BuildPlan)
                  if f.name not in ("repo_root", "notes")}
# Fields whose flags are tested on their own below, or that no flag sets directly.
NOT_IN_CHANGES = {"secrets", "python_version", "pins"}


def test_every_plan_field_has_a_row():
    assert {c[1] for c in CHANGES} | NOT_IN_CHANGES == SOURCED_FIELDS


def test_every_plan_field_has_exactly_one_resolver(host):
    owners: dict[str, list[str]] = {}
    for argv in ([], ["--enable-all"], ["--backend=python", "--endpoint=http"]):
        r = Resolution(parse_flags(argv), host)
        for resolve in RESOLVERS:
            resolved = resolve(r)
            r.values.update(resolved)
            for name in resolved:
                owners.setdefault(name, [])
                if resolve.__name__ not in owners[name]:
                    owners[name].append(resolve.__name__)
    assert set(owners) == SOURCED_FIELDS
    assert {name: o for name, o in owners.items() if len(o) != 1} == {}


def test_a_resolver_reads_only_what_earlier_ones_decided(host):
    # resolve_tag runs after the flavor and the container version: given just those, it
    # decides the tag; without them it cannot.
    r = Resolution({}, host, {"flavor": Sourced("gpu", "flag"),
                              "container_version": Sourced("9.9", "flag")})
    assert resolve_tag(r) == {"tag": Sourced("tritonserver-vllm:9.9-gpu", "default")}
    with pytest.raises(KeyError):
        resolve_tag(Resolution({}, host))


def test_features_resolver(host):
    gpu = {"flavor": Sourced("gpu", "flag")}
    out = resolve_features(Resolution({"enable_all": True}, host, dict(gpu)))
    assert out == {f.field: Sourced(True, "implied", "--enable-all") for f in FEATURES}
    out = resolve_features(Resolution({"enable_metrics": True}, host, dict(gpu)))
    assert [n for n, v in out.items() if v.value] == ["metrics"]
    assert out["metrics"] == Sourced(True, "flag") and out["stats"] == Sourced(False, "default")


def test_build_secret_changes_plan(plan_for, tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine x login y password z\n")
    plan = plan_for("--build-secret", "netrc", str(netrc))
    assert {s.id: s.src for s in plan.secrets.value}["netrc"] == netrc
    assert plan.secrets.source == "flag"



def test_sources(plan_for):
    plan = plan_for("--enable-metrics", "--endpoint=openai")
    assert plan.metrics.source == "flag" and plan.tracing.source == "default"
    assert plan.endpoints.source == "flag"
    assert plan_for("--enable-all").logging.source == "implied"


# Each rule: (flags, error class, words the one-line message must contain).
REJECTED = [
    (["--serve-model-args=--max-model-len 64"], UsageError,
     ["--serve-model-args needs --serve-model"]),
    ([f"--serve-model={MY_LLM.parent}"], ValidationError,
     ["--serve-model", "must be a model folder (holding config.json or params.json)"]),
    ([f"--serve-model={MY_LLM}", "--backend=python"], UnsupportedError,
     ["--serve-model", "needs --backend=vllm"]),
    ([f"--serve-model={MY_LLM}", "--serve-model-args=--x 'open"], ValidationError,
     ["--serve-model-args", "must split as a shell would"]),
    ([f"--serve-model={MY_LLM}", "--serve-model-args=--models m.yaml"], ValidationError,
     ["--serve-model-args", "vllm serve's flags for the one model"]),
    *[([f"--serve-model={MY_LLM}", f"--serve-model-args={args}"], ValidationError,
       [f"--serve-model-args={shown}: --api-key would be baked into the image (a layer, and "
        f"`docker history`): give the key when the container starts, in "
        f"TRITON_OPENAI_API_KEY (docker run -e) or the chart's Secret (openai.apiKey)"])
      for args, shown in [("--max-model-len 64 --api-key s3cret", "--max-model-len 64 --api-key ***"),
                          ("--api-key=s3cret", "--api-key=***"),
                          ("--api_key 's3 cret'", "--api_key ***")]],
    (["--backend=tensorflow"], UnknownValueError, ["--backend", "tensorflow", "vllm, python"]),
    (["--backend=vllm:"], MalformedValueError, ["--backend", "NAME[:TAG]"]),
    (["--backend=python:r23.01"], UnsupportedError, ["--backend", "r24.10"]),
    (["--backend=python:0.1"], MalformedValueError, ["--backend", "TAG must be"]),
    (["--endpoint=rest"], UnknownValueError, ["--endpoint", "rest", "openai"]),
    (["--backend=python", "--endpoint=openai"], ConflictError,
     ["--endpoint", "openai", "--backend=vllm"]),
    (["--filesystem=hdfs"], UnknownValueError, ["--filesystem", "hdfs", "s3"]),
    (["--enable-gpu-metrics"], UnsupportedError, ["--enable-gpu-metrics", "--enable-gpu"]),
    (["--enable-gpu", "--enable-gpu-metrics"], ConflictError,
     ["--enable-gpu-metrics", "--enable-metrics"]),
    (["--enable-cpu-metrics"], ConflictError, ["--enable-cpu-metrics", "--enable-metrics"]),
    (["--enable-metrics", "--disable-metrics"], ConflictError,
     ["--disable-metrics", "--enable-metrics"]),
    (["--enable-all", "--disable-metrics"], ConflictError, ["--disable-metrics", "--enable-all"]),
    (["--backend=vllm", "--endpoint=openai", "--disable-metrics", "--enable-cpu-metrics"],
     ConflictError, ["--enable-cpu-metrics", "--enable-metrics"]),
    (["--upstream-container-version=24.1"], MalformedValueError, ["24.1", "YY.MM"]),
    (["--upstream-container-version=24.13"], MalformedValueError, ["24.13", "YY.MM"]),
    (["--upstream-container-version=25.01"], UnsupportedError,
     ["--upstream-container-version", "25.01", "--enable-gpu"]),
    (["--enable-gpu", "--upstream-container-version=24.10"], UnsupportedError,
     ["--upstream-container-version=24.10: no tested vLLM pairing", "vLLM 0.5.5",
      "25.11 (vLLM 0.11.0)", "--vllm-version"]),
    (["--enable-gpu", "--upstream-container-version=25.05"], UnsupportedError,
     ["--upstream-container-version=25.05: no tested vLLM pairing", "no row", "--vllm-version"]),
    (["--container-version=a b"], MalformedValueError, ["--container-version"]),
    (["--image=runtime,x:y"], UnknownValueError, ["--image", "runtime,x:y", "gpu-base"]),
    (["--image=base"], MalformedValueError, ["--image", "NAME,IMAGE"]),
    (["--image=base,Not An Image"], MalformedValueError, ["--image"]),
    (["--image=gpu-base,nvcr.io/x:1"], UnsupportedError, ["--image", "gpu-base", "--enable-gpu"]),
    (["-v", "-q"], ConflictError, ["-q", "-v"]),
    (["--build-secret", "token", "abc"], UnknownValueError, ["--build-secret", "token", "pip_cert"]),
    (["--build-secret", "netrc", "/no/such/file"], ValidationError, ["--build-secret", "file"]),
    (["--tag=Bad Tag"], MalformedValueError, ["--tag"]),
    # A line break at the end: `$` would have let it through, and it would end a Dockerfile line.
    (["--tag=me/triton:dev\n"], MalformedValueError, ["--tag"]),
    (["--vllm-version=0.32.0\n"], MalformedValueError, ["--vllm-version"]),
    (["--pip-index-url=ftp://x"], MalformedValueError, ["--pip-index-url", "http"]),
    (["--pip-extra-index-url=nope"], MalformedValueError, ["--pip-extra-index-url"]),
    (["--wheelhouse=/no/such/dir"], ValidationError, ["--wheelhouse", "/no/such/dir"]),
    (["--wheelhouse=none"], UnsupportedError, ["--wheelhouse", "torch=="]),
    (["--vllm-version=latest"], MalformedValueError, ["--vllm-version", "latest"]),
    (["--backend=vllm:0.31.0", "--vllm-version=0.30.0"], ConflictError, ["--vllm-version"]),
]


@pytest.mark.parametrize("argv,error,words", REJECTED, ids=[" ".join(r[0]) for r in REJECTED])
def test_rejected(plan_for, argv, error, words):
    with pytest.raises(error) as e:
        plan_for(*argv)
    message = str(e.value)
    assert "\n" not in message
    for word in words:
        assert word in message
    assert "s3cret" not in message and "s3 cret" not in message  # a key is never echoed
    assert e.value.exit_code == 2


def test_build_dir_that_is_a_file(plan_for, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(ValidationError, match="--build-dir"):
        plan_for(f"--build-dir={f}")


def test_wheelhouse_flag(plan_for, wheelhouse, tmp_path):
    other = tmp_path / "wheels"
    other.mkdir()
    name = next(wheelhouse.iterdir()).name
    (other / name).write_bytes(b"stand-in")
    plan = plan_for(f"--wheelhouse={other}")
    assert plan.wheelhouse.value == other and plan.wheelhouse.source == "flag"

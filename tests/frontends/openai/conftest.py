import pytest
from fastapi.testclient import TestClient
from frontend_process import Frontend
from openai_fakes import FakeTokenizers, FakeTriton

from triton_openai import FrontendConfig, build_app


@pytest.fixture
def triton():
    return FakeTriton()


@pytest.fixture
def make_client(triton):
    clients = []

    def make(config: FrontendConfig | None = None, fake=None):
        config = config or FrontendConfig(triton_metrics_url=None)
        app = build_app(config, client=fake or triton)
        # No model folder exists in unit tests: the fake tokenizer stands in.
        app.state.completions.gen.tokenizers = FakeTokenizers()
        c = TestClient(app)
        c.__enter__()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client()


@pytest.fixture
def frontend(tmp_path):
    """Starts real `triton-openai` processes over the fake Triton; stops them after."""
    started: list[Frontend] = []

    def start(delay: float, grace: float, *args: str) -> Frontend:
        started.append(Frontend(tmp_path / str(len(started)), delay, grace, *args))
        return started[-1]

    yield start
    for f in started:
        f.stop()

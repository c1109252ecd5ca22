"""qa/common/kubelet.py turns a rendered pod into a `docker run` (no Docker needed here):
every field the conformance run relies on must reach the command, and anything it cannot
reproduce must be refused, not skipped."""

from __future__ import annotations

import copy
import http.server
import threading

import pytest

from qa.common import chart
from qa.common.kubelet import PodContainer, PodError, Probe, quantity_bytes


@pytest.fixture
def rendered():
    return chart.render([chart.CHART / "ci" / "frontend-only-values.yaml"])


def _pod(manifests, tmp_path, name="llm-triton-vllm", container="triton"):
    template = chart.find(manifests, "Deployment", name)["spec"]["template"]
    return PodContainer(manifests, template, container, network="net", workdir=tmp_path,
                        name="pod")


def _flag_values(args, flag):
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_quantities():
    assert quantity_bytes("1Gi") == 2**30
    assert quantity_bytes("512Mi") == 512 * 2**20
    assert quantity_bytes(3) == 3
    with pytest.raises(PodError):
        quantity_bytes("lots")


def test_triton_pod_becomes_a_docker_run(rendered, tmp_path):
    pod = _pod(rendered, tmp_path)
    args = pod.docker_args()
    assert _flag_values(args, "--user") == ["1000:1000"]
    assert _flag_values(args, "--group-add") == ["1000"]
    assert "--read-only" in args
    assert _flag_values(args, "--cap-drop") == ["ALL"]
    assert _flag_values(args, "--security-opt") == ["no-new-privileges"]
    assert "--shm-size=1073741824" in args and "--memory=17179869184" in args
    # The Services that select the pod are its DNS names.
    assert _flag_values(args, "--network-alias") == ["llm-triton-vllm-triton"]
    # emptyDirs: fresh folders anyone may write, as the kubelet makes them.
    mounts = _flag_values(args, "-v")
    assert {m.split(":")[1] for m in mounts} == {"/tmp", "/home/triton"}
    assert all((tmp_path / m.split(":")[0].rsplit("/", 1)[1]).stat().st_mode & 0o777 == 0o777
               for m in mounts)
    # The API key comes from the rendered Secret.
    env = dict(e.split("=", 1) for e in _flag_values(args, "-e"))
    assert len(env["TRITON_OPENAI_API_KEY"]) == 40
    assert env["ENABLE_VLLM_HEALTH_CHECK"] == "true"
    # The image, then the rendered args (no command: the image's entrypoint).
    image = pod.container["image"]
    assert args[args.index(image) + 1:] == ["--model-control-mode=explicit", "--load-model=*"]
    assert len(pod.ports) == 4


def test_frontend_pod_is_the_openai_service(rendered, tmp_path):
    args = _pod(rendered, tmp_path, "llm-triton-vllm-frontend", "frontend").docker_args()
    assert _flag_values(args, "--network-alias") == ["llm-triton-vllm"]


def test_what_it_cannot_run_is_refused(rendered, tmp_path):
    manifests = copy.deepcopy(rendered)
    spec = chart.find(manifests, "Deployment", "llm-triton-vllm")["spec"]["template"]["spec"]
    spec["volumes"][0] = {"name": "tmp", "persistentVolumeClaim": {"claimName": "x"}}
    with pytest.raises(PodError, match="only emptyDir, configMap and secret"):
        _pod(manifests, tmp_path).docker_args()
    manifests = copy.deepcopy(rendered)
    spec = chart.find(manifests, "Deployment", "llm-triton-vllm")["spec"]["template"]["spec"]
    spec["containers"][0]["env"].append({"name": "POD_IP", "valueFrom": {
        "fieldRef": {"fieldPath": "status.podIP"}}})
    with pytest.raises(PodError, match="env POD_IP: unsupported source"):
        _pod(manifests, tmp_path).docker_args()


def test_config_map_files_follow_their_item_paths(tmp_path):
    manifests = chart.render([chart.CHART / "ci" / "gpu-tp-values.yaml"])
    template = chart.find(manifests, "Deployment")["spec"]["template"]
    pod = PodContainer(manifests, template, "triton", network="n", workdir=tmp_path, name="p")
    volume = next(v for v in template["spec"]["volumes"] if v["name"] == "model-repository")
    # The chart's one key, put in a folder of its own.
    nested = {**volume["configMap"], "items": [{"key": "models.yaml", "path": "serve/models.yaml"}]}
    host = pod._files({**volume, "configMap": nested})
    assert '"--tensor-parallel-size","2"' in (host / "serve/models.yaml").read_text()
    assert sorted(p.name for p in host.iterdir() if not p.name.startswith("..")) == ["serve"]


@pytest.fixture
def ready_server():
    """An HTTP server that is ready only for the sample model, and records what it got."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("User-Agent")))
            self.send_response(200 if self.path == "/health/ready?model=vllm_model" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()


def test_http_probe_sends_the_rendered_path_and_query(rendered, tmp_path, ready_server):
    port, seen = ready_server
    pod = _pod(rendered, tmp_path)
    openai = next(p["containerPort"] for p in pod.container["ports"] if p["name"] == "openai")
    pod.ports[openai] = port  # where `docker run -p` would have published it
    spec = pod.container["readinessProbe"]
    assert Probe(pod, spec).check() == (True, "HTTP 200")
    assert seen[-1] == ("/health/ready?model=vllm_model", "kube-probe/1.37")
    other = copy.deepcopy(spec)
    other["httpGet"]["path"] = "/health/ready?model=no_such_model"
    assert Probe(pod, other).check() == (False, "HTTP 503")
    other["httpGet"]["host"] = "10.0.0.1"
    with pytest.raises(PodError, match="httpGet.host"):
        Probe(pod, other).check()

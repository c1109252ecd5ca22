"""The Helm chart rendered by Helm's own engine: lint, Kubernetes schemas, golden
manifests, values rejected by the schema, and agreement with the image and backend.

    TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/helm   # regenerate golden/ (review the diff)
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from pathlib import Path

import pytest
import yaml

from qa.common import chart

HERE = Path(__file__).parent
# Values files kept with the chart (chart-testing's ci/ convention).
FIXTURES = sorted((chart.CHART / "ci").glob("*-values.yaml"))
GOLDEN = HERE / "golden"
UPDATE_GOLDEN = os.environ.get("TVB_UPDATE_GOLDEN") == "1"
# A current Kubernetes release, as kubernetes-validate ships its schemas.
KUBERNETES = "1.37.0"
# Custom resources: kubernetes-validate has no schemas for them; their apiVersion is
# checked here and their fields by the tests below.
CUSTOM_KINDS = {
    "HTTPRoute": "gateway.networking.k8s.io/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "PodMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
    "ScaledObject": "keda.sh/v1alpha1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
}


def fixture_id(path: Path) -> str:
    return path.name.removesuffix("-values.yaml")


def rendered(name: str, **values) -> list[dict]:
    return chart.render([chart.CHART / "ci" / f"{name}-values.yaml"], values or None)


def pod_spec(manifests: list[dict]) -> dict:
    workload = next(m for m in manifests if m["kind"] in ("Deployment", "StatefulSet")
                    and m["metadata"]["labels"]["app.kubernetes.io/component"] == "server")
    return workload["spec"]["template"]["spec"]


def container(spec: dict, name: str = "triton") -> dict:
    return next(c for c in spec["containers"] if c["name"] == name)


# ------------------------------------------------------------------ lint, schemas
def test_lint_strict_finds_nothing():
    import helm_python

    report = helm_python.lint(str(chart.CHART), strict=True)
    findings = [m for m in report["messages"] if m["severity"] >= 2]  # warnings, errors
    assert not findings and not report["errors"], report


def test_fixtures_cover_the_workload_variants():
    assert {fixture_id(p) for p in FIXTURES} >= {"default", "gpu-tp", "pvc-cache", "frontend-only",
                                           "keda", "multi-node", "observability"}


@pytest.mark.parametrize("values_file", FIXTURES, ids=fixture_id)
def test_every_manifest_is_valid_kubernetes(values_file):
    import kubernetes_validate

    for manifest in chart.render([values_file]):
        kind = manifest["kind"]
        if kind in CUSTOM_KINDS:
            assert manifest["apiVersion"] == CUSTOM_KINDS[kind], kind
            continue
        try:
            kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{kind} {manifest['metadata']['name']}: {err.message} "
                        f"at {'/'.join(map(str, err.path))}")


def _stable(manifests: list[dict]) -> list[dict]:
    """Random parts (a generated API key) masked, so that a render is reproducible."""
    for m in manifests:
        if m["kind"] == "Secret" and m["metadata"]["name"].endswith(("-api-key",
                                                                   "-model-control-key")):
            m["data"] = {k: "<random>" for k in m["data"]}
    return manifests


@pytest.mark.parametrize("values_file", FIXTURES, ids=fixture_id)
def test_golden_manifests(values_file):
    text = yaml.safe_dump_all(_stable(chart.render([values_file])), sort_keys=False, width=100)
    text += "# NOTES.txt\n" + "".join(f"# {line}\n" for line in
                                       chart.notes([values_file]).strip().splitlines())
    golden = GOLDEN / f"{fixture_id(values_file)}.yaml"
    if UPDATE_GOLDEN:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no {golden}: TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/helm"
    assert text == golden.read_text(), (
        f"{values_file.name} renders differently from {golden.name}; if intended, "
        "TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/helm and review the diff")


def test_only_the_image_needs_setting():
    """`--set image.repository=... --set image.tag=...` alone gives the sample model."""
    manifests = chart.render(values={"image": {"repository": "r.example/tv", "tag": "t1"}})
    spec = pod_spec(manifests)
    assert container(spec)["image"] == "r.example/tv:t1"
    assert [m["kind"] for m in manifests if not chart.hooks([m])] == [
        "Deployment", "Secret", "Service", "Service", "ServiceAccount"]


# -------------------------------------------------------------- rejected values
REJECTED = [
    ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    ({"image": {"tagg": "x"}}, "at '/image': additional properties 'tagg' not allowed"),
    ({"replicaCount": "2"}, "at '/replicaCount': got string, want integer"),
    ({"gpu": {"count": -1}}, "at '/gpu/count': minimum: got -1, want 0"),
    ({"modelRepository": {"source": "s3"}}, "at '/modelRepository/source'"),
    ({"models": [{"name": "m", "modle": "x"}]}, "at '/models/0': additional properties 'modle'"),
    ({"image": {"digest": "1234"}}, "at '/image/digest'"),
    ({"shm": {"sizeLimit": "lots"}}, "at '/shm/sizeLimit'"),
    ({"keda": {"kvCacheUsageThreshold": "80"}}, "at '/keda/kvCacheUsageThreshold'"),
    ({"metrics": {"prometheusRule": {"alerts": {"kvCacheUsage": 90}}}},
     "at '/metrics/prometheusRule/alerts/kvCacheUsage'"),
    ({"metrics": {"prometheusRule": {"alerts": {"for": "five minutes"}}}},
     "at '/metrics/prometheusRule/alerts/for'"),
    ({"metrics": {"dashboard": {"labels": {"grafana_dashboard": 1}}}},
     "at '/metrics/dashboard/labels/grafana_dashboard'"),
    ({"server": {"extraArgs": ["log-verbose=1"]}}, "at '/server/extraArgs/0'"),
    ({"probes": {"startup": {"budgetSeconds": "10m"}}},
     "at '/probes/startup/budgetSeconds': got string, want integer"),
]


@pytest.mark.parametrize(("values", "message"), REJECTED, ids=[str(v) for v, _ in REJECTED])
def test_schema_rejects_bad_values(values, message):
    with pytest.raises(chart.ChartError) as err:
        chart.render(values=values)
    assert message in str(err.value)


# Rules across values that the schema cannot state: the chart fails with one line.
FAILED = [
    ({"autoscaling": {"enabled": True}, "keda": {"enabled": True}},
     "autoscaling.enabled and keda.enabled both scale the same pods"),
    ({"modelRepository": {"source": "values"}}, "needs at least one entry in models"),
    ({"models": [{"name": "m", "model": "x"}]}, "models are used only with modelRepository"),
    ({"modelRepository": {"source": "pvc"}}, "needs modelRepository.pvc.claimName"),
    ({"modelRepository": {"source": "values"}, "models": [{"name": "m"}]},
     "models[m] needs model"),
    ({"modelRepository": {"source": "values"},
      "models": [{"name": "m", "fetch": {"source": "s3", "uri": "s3://b/m"}}]},
     "fetch.source=s3 needs fetch.image"),
    ({"multiNode": {"enabled": True}}, "multiNode.enabled needs modelRepository.source=values"),
    ({"ingress": {"enabled": True}}, "ingress.enabled needs ingress.host"),
    ({"httpRoute": {"enabled": True}}, "httpRoute.enabled needs httpRoute.parentRefs"),
]


@pytest.mark.parametrize(("values", "message"), FAILED, ids=[m for _, m in FAILED])
def test_chart_refuses_contradictions(values, message):
    with pytest.raises(chart.ChartError) as err:
        chart.render(values=values)
    assert message in str(err.value)


# ---------------------------------------------------------------- pod contract
def test_pod_runs_non_root_read_only_with_memory_shm():
    spec = pod_spec(rendered("default"))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 1000
    triton = container(spec)
    ctx = triton["securityContext"]
    assert ctx["readOnlyRootFilesystem"] is True and ctx["capabilities"]["drop"] == ["ALL"]
    assert ctx["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m["name"] for m in triton["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    # Where the server writes with a read-only root (torch's compile cache, the Python
    # backend's environments, vLLM's caches under $HOME).
    for path in ("/tmp", "/home/triton"):
        assert "emptyDir" in volumes[mounts[path]], path
    assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}


def test_ports_agree_with_the_image():
    from tritonbuild.ports import PORTS

    manifests = rendered("frontend-only")
    ports = {p["name"]: p["containerPort"] for p in container(pod_spec(manifests))["ports"]}
    assert ports == {name: PORTS[name] for name in ("http", "grpc", "metrics", "openai")}
    # The frontend-only pods run the image's frontend on the same port.
    frontend = container(chart.find(manifests, "Deployment", "llm-triton-vllm-frontend")
                         ["spec"]["template"]["spec"], "frontend")
    assert frontend["ports"] == [{"name": "openai", "containerPort": PORTS["openai"]}]
    assert f"--port={PORTS['openai']}" in frontend["args"]
    # Every probe and Service names its port: the numbers are written once.
    for m in manifests:
        if m["kind"] == "Service":
            assert all(isinstance(p["targetPort"], str) for p in m["spec"]["ports"])
    for c in (container(pod_spec(manifests)), frontend):
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            if "httpGet" in c.get(kind, {}):
                assert isinstance(c[kind]["httpGet"]["port"], str), kind


def test_app_version_is_build_py_default_cpu_tag():
    from tritonbuild import pins

    meta = yaml.safe_load((chart.CHART / "Chart.yaml").read_text())
    assert meta["appVersion"] == f"{pins.get('triton.upstream_container_version')}-cpu"


def test_probes_have_their_roles():
    spec = pod_spec(rendered("default"))
    triton = container(spec)
    startup, ready, live = (triton[k] for k in ("startupProbe", "readinessProbe", "livenessProbe"))
    # Model load: the startup budget is what the pod gets, then it is restarted.
    assert startup["httpGet"] == {"path": "/health/ready?model=vllm_model", "port": "openai"}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    # Ready: one GET on the frontend, which also requires every model of the release.
    assert ready["httpGet"] == startup["httpGet"]
    # Alive: Triton reachable and no model dead, by the image's watch (a check that only
    # goes unanswered, as on a busy engine, passes).
    from triton_vllm_backend import watch

    from tritonbuild.pipeline.components.vllm_backend import VllmBackend
    command = live["exec"]["command"]
    assert command[:5] == ["env", f"PYTHONPATH={VllmBackend.DIR}", "python3", "-m",
                           "triton_vllm_backend.watch"]
    assert "--once" in command
    # Flags the watch takes: against nothing listening, it fails as a probe should.
    assert watch.main(command[5:] + ["--url", "http://127.0.0.1:9"]) == 1
    assert live["timeoutSeconds"] * live["failureThreshold"] >= 30


def test_startup_budget_rounds_up_to_whole_periods():
    triton = container(pod_spec(chart.render(values={"probes": {"startup": {
        "budgetSeconds": 95, "periodSeconds": 10}}})))
    assert triton["startupProbe"]["failureThreshold"] == 10


def test_gpu_count_reaches_requests_and_limits():
    triton = container(pod_spec(rendered("gpu-tp")))
    assert triton["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert triton["resources"]["requests"]["nvidia.com/gpu"] == 2
    assert triton["resources"]["requests"]["cpu"] == "8"


def test_every_pod_gets_the_pull_secrets():
    manifests = rendered("gpu-tp")
    pods = [pod_spec(manifests)] + [h["spec"] for h in chart.hooks(manifests)]
    assert all(p["imagePullSecrets"] == [{"name": "regcred"}] for p in pods)


def test_fetched_models_come_from_init_containers_with_secret_credentials():
    manifests = rendered("pvc-cache")
    workload = chart.find(manifests, "StatefulSet")
    spec = workload["spec"]["template"]["spec"]
    s3, hf = spec["initContainers"]
    assert s3["command"] == ["aws", "s3", "sync", "s3://models/mistral-7b-instruct",
                             "/cache/models/mistral"]
    assert s3["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    assert hf["command"][-2:] == ["sentence-transformers/all-MiniLM-L6-v2", "/cache/models/minilm"]
    # One claim per pod, from the StatefulSet's template, and its headless Service.
    assert workload["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "model-cache"
    headless = chart.find(manifests, "Service", workload["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"


def test_api_key_reaches_the_frontend_by_reference():
    from triton_openai.cli import API_KEY_ENV

    manifests = rendered("frontend-only")
    secret = chart.find(manifests, "Secret", "llm-triton-vllm-api-key")
    key = base64.b64decode(secret["data"]["api-key"]).decode()
    assert len(key) == 40
    frontend = chart.find(manifests, "Deployment", "llm-triton-vllm-frontend")
    for spec in (pod_spec(manifests), frontend["spec"]["template"]["spec"]):
        env = {e["name"]: e for e in spec["containers"][0]["env"]}
        assert env[API_KEY_ENV]["valueFrom"]["secretKeyRef"] == {
            "name": secret["metadata"]["name"], "key": "api-key"}


def env_of(c: dict) -> dict[str, dict]:
    return {e["name"]: e for e in c.get("env", [])}


def model_control_keys(manifests: list[dict]) -> dict[str, dict | None]:
    """Container (workload/container) -> its TRITON_MODEL_CONTROL_KEY's Secret reference."""
    found = {}
    for m in manifests:
        spec = m.get("spec", {})
        templates = ([spec["template"]] if "template" in spec else
                     list(spec.get("leaderWorkerTemplate", {}).values()))
        for t in (t for t in templates if isinstance(t, dict) and "spec" in t):
            for c in t["spec"]["containers"]:
                var = env_of(c).get("TRITON_MODEL_CONTROL_KEY")
                found[f"{m['kind']}/{c['name']}"] = (
                    var["valueFrom"]["secretKeyRef"] if var else None)
    return found


GENERATED = {"name": "llm-triton-vllm-model-control-key", "key": "model-control-key"}


@pytest.mark.parametrize("fixture, expected", [
    ("default", {"Deployment/triton": GENERATED}),
    ("frontend-only", {"Deployment/triton": GENERATED, "Deployment/frontend": GENERATED}),
    ("pvc-cache", {"StatefulSet/triton": GENERATED}),
    # A group's workers run no tritonserver and call no Triton API.
    ("multi-node", {"LeaderWorkerSet/triton": GENERATED, "LeaderWorkerSet/engine-worker": None}),
])
def test_the_model_control_key_reaches_every_triton_and_frontend_pod(fixture, expected):
    manifests = rendered(fixture)
    assert model_control_keys(manifests) == expected
    secret = chart.find(manifests, "Secret", GENERATED["name"])
    key = base64.b64decode(secret["data"]["model-control-key"]).decode()
    assert len(key) == 40 and key.isalnum()
    # Made once, then kept across upgrades: helm.sh/resource-policy is not needed.
    assert "annotations" not in secret["metadata"]


def test_a_model_control_key_of_your_own_comes_from_your_secret():
    manifests = rendered("frontend-only", server={"modelControlKey": {
        "existingSecret": "triton-admin", "secretKey": "key"}})
    mine = {"name": "triton-admin", "key": "key"}
    assert model_control_keys(manifests) == {"Deployment/triton": mine,
                                             "Deployment/frontend": mine}
    assert [m["metadata"]["name"] for m in manifests if m["kind"] == "Secret"] == [
        "llm-triton-vllm-api-key"]


def test_frontend_only_pods_serve_the_openai_service():
    manifests = rendered("frontend-only")
    service = chart.find(manifests, "Service", "llm-triton-vllm")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "frontend"
    frontend = chart.find(manifests, "Deployment", "llm-triton-vllm-frontend")
    args = frontend["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["triton-openai", "--triton-url=http://llm-triton-vllm-triton:8000",
                        "--triton-metrics-url=http://llm-triton-vllm-triton:8002/metrics"]
    assert frontend["spec"]["replicas"] == 3


@pytest.mark.parametrize(("grace", "drain"), [(45, "35"), (5, "1")])
def test_drain_ends_before_the_kubelet_kills_the_pod(grace, drain):
    """On SIGTERM the image drains requests for SHUTDOWN_GRACE_SECONDS (the frontend alone
    for TRITON_OPENAI_SHUTDOWN_TIMEOUT): both leave 10 s of the grace period to exit."""
    manifests = rendered("frontend-only", terminationGracePeriodSeconds=grace)
    server = pod_spec(manifests)
    env = {e["name"]: e.get("value") for e in container(server)["env"]}
    assert server["terminationGracePeriodSeconds"] == grace
    assert env["SHUTDOWN_GRACE_SECONDS"] == drain
    frontend = chart.find(manifests, "Deployment", "llm-triton-vllm-frontend")["spec"]["template"]
    env = {e["name"]: e.get("value") for e in frontend["spec"]["containers"][0]["env"]}
    assert frontend["spec"]["terminationGracePeriodSeconds"] == grace
    assert env["TRITON_OPENAI_SHUTDOWN_TIMEOUT"] == drain


@pytest.mark.parametrize("values_file", FIXTURES, ids=fixture_id)
def test_readiness_requires_every_model_the_release_serves(values_file):
    """The frontend's /health/ready?model=... (triton_openai.health) is each serving pod's
    readiness: the Triton pods' and the frontend-only pods' ask for the same models."""
    manifests = chart.render([values_file])
    values = chart.load_values([values_file])
    source = values.get("modelRepository", {}).get("source", "sample")
    expected = {"sample": ["vllm_model"],
                "values": [m["name"] for m in values.get("models", [])],
                "pvc": values.get("modelRepository", {}).get("pvc", {}).get("modelNames", []),
                }.get(source)
    probes = [c[kind] for m in manifests if m["kind"] in ("Deployment", "StatefulSet",
                                                          "LeaderWorkerSet")
              for spec in _pod_specs(m) for c in spec["containers"]
              for kind in ("startupProbe", "readinessProbe") if kind in c]
    assert probes
    for probe in probes:
        assert urllib.parse.urlsplit(probe["httpGet"]["path"]).path == "/health/ready"
        assert probe["httpGet"]["port"] == "openai"
        if expected is not None:
            assert chart.required_models(probe) == expected


def test_readiness_names_are_url_encoded():
    manifests = chart.render(values={"modelRepository": {"source": "pvc", "pvc": {
        "claimName": "c", "modelNames": ["a&b", "c d"]}}})
    probe = container(pod_spec(manifests))["readinessProbe"]
    assert chart.required_models(probe) == ["a&b", "c d"]


def _pod_specs(workload: dict) -> list[dict]:
    if workload["kind"] == "LeaderWorkerSet":
        template = workload["spec"]["leaderWorkerTemplate"]
        return [template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]]
    return [workload["spec"]["template"]["spec"]]


# ------------------------------------------------- pod metadata, workload kind
# Each way the chart runs the Triton pods, with the models from values (which adds the
# checksum/models annotation) and labels and annotations of the user's own.
WORKLOADS = {
    "Deployment": {},
    "StatefulSet": {"modelCache": {"enabled": True, "perReplica": True}},
    "LeaderWorkerSet": {"multiNode": {"enabled": True, "size": 2},
                        "modelCache": {"enabled": True, "accessModes": ["ReadWriteMany"]}},
}
POD_LABELS = {"team": "llm", "example.com/tier": "gold"}
POD_ANNOTATIONS = {"example.com/owner": "ml-platform"}


def _release(kind: str, models: list[dict] | None = None, **values) -> list[dict]:
    return chart.render(values={
        "modelRepository": {"source": "values"},
        # A group splits its one model's ranks between its pods.
        "models": models or [{"name": "m", "model": "org/m", "pipelineParallelSize": 2}],
        "podLabels": POD_LABELS, "podAnnotations": POD_ANNOTATIONS,
        **WORKLOADS[kind], **values})


def pod_templates(manifests: list[dict]) -> dict[str, dict]:
    """Every pod template the release renders, by workload kind and name (and role)."""
    found = {}
    for m in manifests:
        name = f"{m['kind']}/{m['metadata']['name']}"
        spec = m.get("spec", {})
        if "template" in spec:
            found[name] = spec["template"]
        for role, template in spec.get("leaderWorkerTemplate", {}).items():
            if isinstance(template, dict) and "spec" in template:
                found[f"{name}/{role}"] = template
    return found


@pytest.mark.parametrize("frontend", [False, True], ids=["triton-only", "with-frontend"])
@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_every_pod_template_gets_the_same_metadata(kind, frontend):
    manifests = _release(kind, frontend={"enabled": frontend})
    templates = pod_templates(manifests)
    roles = {"Deployment": ["Deployment/llm-triton-vllm"],
             "StatefulSet": ["StatefulSet/llm-triton-vllm"],
             "LeaderWorkerSet": ["LeaderWorkerSet/llm-triton-vllm/leaderTemplate",
                                 "LeaderWorkerSet/llm-triton-vllm/workerTemplate"]}[kind]
    if frontend:
        roles = ["Deployment/llm-triton-vllm-frontend"] + roles
    assert sorted(templates) == sorted(roles)
    checksums = set()
    for name, template in templates.items():
        labels, annotations = template["metadata"]["labels"], template["metadata"]["annotations"]
        assert POD_LABELS.items() <= labels.items(), name
        assert POD_ANNOTATIONS.items() <= annotations.items(), name
        if name.endswith("-frontend"):
            # The frontend reads no model configuration: its pods stay up when it changes.
            assert "checksum/models" not in annotations, name
            continue
        assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/models"]), name
        checksums.add(annotations["checksum/models"])
        assert labels["app.kubernetes.io/instance"] == "llm", name
    assert len(checksums) == 1
    # Each workload's selector picks its own pods.
    for spec in (m["spec"] for m in manifests if "template" in m.get("spec", {})):
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()


def test_multi_node_pods_carry_their_role():
    templates = pod_templates(_release("LeaderWorkerSet"))
    leader = templates["LeaderWorkerSet/llm-triton-vllm/leaderTemplate"]["metadata"]["labels"]
    worker = templates["LeaderWorkerSet/llm-triton-vllm/workerTemplate"]["metadata"]["labels"]
    assert (leader["role"], leader["app.kubernetes.io/component"]) == ("leader", "server")
    assert (worker["role"], worker["app.kubernetes.io/component"]) == ("worker", "worker")


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_a_change_of_the_models_restarts_every_pod(kind):
    def checksums(models):
        return {name: t["metadata"]["annotations"]["checksum/models"]
                for name, t in pod_templates(_release(kind, models)).items()}

    model = {"name": "m", "model": "org/m", "pipelineParallelSize": 2}
    before = checksums([model])
    after = checksums([{**model, "maxModelLen": 2048}])
    assert before.keys() == after.keys()
    assert all(before[name] != after[name] for name in before)


def test_no_annotations_without_models_from_values_or_pod_annotations():
    for template in pod_templates(rendered("default")).values():
        assert "annotations" not in template["metadata"]


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_autoscalers_target_the_workload_the_chart_renders(kind):
    for scaler, values in (("HorizontalPodAutoscaler", {"autoscaling": {"enabled": True}}),
                           ("ScaledObject", {"keda": {"enabled": True}})):
        manifests = _release(kind, **values)
        workloads = [m for m in manifests if m["kind"] in WORKLOADS
                     and m["metadata"]["name"] == "llm-triton-vllm"]
        assert [w["kind"] for w in workloads] == [kind]
        target = chart.find(manifests, scaler)["spec"]["scaleTargetRef"]
        assert target == {"apiVersion": workloads[0]["apiVersion"], "kind": kind,
                          "name": "llm-triton-vllm"}, scaler


def test_service_and_pod_monitors_scrape_alike():
    manifests = chart.render(values={"metrics": {
        "serviceMonitor": {"enabled": True, "interval": "10s", "labels": {"release": "a"}},
        "podMonitor": {"enabled": True, "interval": "20s", "labels": {"release": "b"}}}})
    service, pod = chart.find(manifests, "ServiceMonitor"), chart.find(manifests, "PodMonitor")
    assert service["metadata"]["labels"]["release"] == "a"
    assert pod["metadata"]["labels"]["release"] == "b"
    assert service["spec"]["selector"] == pod["spec"]["selector"]
    (scrape,), (pod_scrape,) = service["spec"]["endpoints"], pod["spec"]["podMetricsEndpoints"]
    assert (scrape.pop("interval"), pod_scrape.pop("interval")) == ("10s", "20s")
    assert scrape == pod_scrape
    assert scrape["port"] == "metrics" and scrape["metricRelabelings"][0]["sourceLabels"] == ["le"]


# ------------------------------------------------------------------ autoscaling
def _backend_gauges() -> set[str]:
    source = (chart.REPO_ROOT / "backends/vllm/triton_vllm_backend/stub/metrics.py").read_text()
    return set(re.findall(r'\(GAUGE, "(vllm:[a-z_]+)"', source))


def test_autoscalers_read_gauges_the_backend_exports():
    gauges = _backend_gauges()
    assert gauges == {"vllm:num_requests_running", "vllm:num_requests_waiting",
                      "vllm:kv_cache_usage_perc"}
    keda = chart.find(rendered("keda"), "ScaledObject")
    queried = {re.match(r"sum\((vllm:\w+)\{", t["metadata"]["query"]).group(1)
               for t in keda["spec"]["triggers"]}
    assert queried and queried <= gauges
    hpa = chart.find(rendered("frontend-only"), "HorizontalPodAutoscaler")
    # prometheus-adapter's usual rule serves vllm:X as vllm_X.
    names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    assert names <= {g.replace(":", "_") for g in gauges}
    assert hpa["apiVersion"] == "autoscaling/v2"


def test_autoscaler_owns_the_replica_count():
    for fixture, kind in (("frontend-only", "HorizontalPodAutoscaler"), ("keda", "ScaledObject")):
        manifests = rendered(fixture)
        deployment = chart.find(manifests, "Deployment", "llm-triton-vllm")
        assert "replicas" not in deployment["spec"], fixture
        target = chart.find(manifests, kind)["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", "llm-triton-vllm")


def test_monitors_select_the_metrics_port():
    manifests = rendered("keda")
    monitor = chart.find(manifests, "ServiceMonitor")
    service = chart.find(manifests, "Service", "llm-triton-vllm-triton")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    # Only Triton's Service, not the OpenAI one (it would scrape the same pods twice).
    openai = chart.find(manifests, "Service", "llm-triton-vllm")
    assert not selector.items() <= openai["metadata"]["labels"].items()


# ---------------------------------------------------------------- network policy
RELEASE_PODS = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "triton-vllm",
                                                "app.kubernetes.io/instance": "llm"}}}
GATEWAY = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}}
MONITORING = {"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "monitoring"}}}
ADMIN = {"podSelector": {"matchLabels": {"role": "model-admin"}}}
OPENAI_PORT = [{"port": "openai"}]
KSERVE_PORTS = [{"port": "http"}, {"port": "grpc"}]
METRICS_PORT = [{"port": "metrics"}]
# The ports vLLM's ranks pick, all of them, from the pods of the release's multi-node groups.
GROUP = {"from": [{"podSelector": {
    "matchLabels": RELEASE_PODS["podSelector"]["matchLabels"],
    "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                          "values": ["server", "worker"]}]}}]}

NETWORK_POLICIES = [
    # Nothing listed: the OpenAI and metrics ports open to all, KServe to the release only.
    ("default", {}, [
        {"ports": OPENAI_PORT},
        {"ports": KSERVE_PORTS, "from": [RELEASE_PODS]},
        {"ports": METRICS_PORT}]),
    ("pvc-cache", {}, [
        {"ports": OPENAI_PORT, "from": [GATEWAY, RELEASE_PODS]},
        {"ports": KSERVE_PORTS, "from": [RELEASE_PODS]},
        {"ports": METRICS_PORT, "from": [MONITORING]}]),
    # The gateway's peers reach the OpenAI port only, unless kserveFrom names them too.
    ("pvc-cache", {"kserveFrom": [ADMIN]}, [
        {"ports": OPENAI_PORT, "from": [GATEWAY, RELEASE_PODS]},
        {"ports": KSERVE_PORTS, "from": [RELEASE_PODS, ADMIN]},
        {"ports": METRICS_PORT, "from": [MONITORING]}]),
    ("multi-node", {}, [
        {"ports": OPENAI_PORT},
        {"ports": KSERVE_PORTS, "from": [RELEASE_PODS]},
        {"ports": METRICS_PORT},
        GROUP]),
]


@pytest.mark.parametrize("fixture, values, ingress", NETWORK_POLICIES,
                         ids=[f"{f}-{sorted(v)}" for f, v, _ in NETWORK_POLICIES])
def test_network_policy_opens_each_port_to_its_own_peers(fixture, values, ingress):
    manifests = rendered(fixture, networkPolicy={"enabled": True, **values})
    policy = chart.find(manifests, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == RELEASE_PODS["podSelector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == ingress


def test_network_policy_is_off_unless_enabled():
    assert [m for m in rendered("default") if m["kind"] == "NetworkPolicy"] == []


# ------------------------------------------------------------------ multi-node
def test_multi_node_renders_a_leader_worker_set_of_one_engine():
    manifests = rendered("multi-node")
    lws = chart.find(manifests, "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    # The leader serves the models file like any server pod; vLLM's rendezvous is its.
    assert leader["args"] == ["serve", "--models", "/etc/triton-vllm/models.yaml", "--",
                              "--model-control-mode=explicit", "--load-model=*"]
    assert worker["args"] == ["worker", "--models", "/etc/triton-vllm/models.yaml"]
    models = chart.find(manifests, "ConfigMap", "llm-triton-vllm-models")
    flags = yaml.safe_load(models["data"]["models.yaml"])["models"][0]["args"]
    assert flags[-4:] == ["--nnodes", "2", "--master-port", "29500"]
    assert {"name": "dist", "containerPort": 29500} in leader["ports"]
    assert {"name": "group", "containerPort": 29400} in leader["ports"]
    for c in (leader, worker):
        env = env_of(c)
        assert env["TRITON_VLLM_GROUP_PORT"]["value"] == "29400"
        assert env["TRITON_VLLM_GROUP_JOIN_SECONDS"]["value"] == "300"
    assert "startupProbe" in leader and "readinessProbe" not in worker
    for c in (leader, worker):
        assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
    # Only leaders serve: the Services select them.
    for service in (m for m in manifests if m["kind"] == "Service"):
        assert service["spec"]["selector"]["role"] == "leader"


@pytest.mark.parametrize("fixture", ["multi-node", "gpu-tp", "default", "frontend-only"])
def test_no_pod_replaces_the_image_entrypoint(fixture):
    """The GPU image's ENTRYPOINT is NVIDIA's (CUDA forward compatibility, its hooks) in
    front of the image's own: a `command` in any serving pod would skip both."""
    workloads = [m for m in rendered(fixture)
                 if m["kind"] in ("Deployment", "StatefulSet", "LeaderWorkerSet")]
    for spec in (s for w in workloads for s in _pod_specs(w)):
        for c in spec["containers"]:
            assert "command" not in c, f"{c['name']} replaces the image's entrypoint"


def test_workers_fetch_their_own_weights_without_a_shared_cache():
    fetch = {"source": "hf", "uri": "org/m"}
    for cache, worker_fetches in ((False, True), (True, False)):
        lws = chart.find(_release("LeaderWorkerSet", [{"name": "m", "fetch": fetch,
                                                       "tensorParallelSize": 2}],
                                  modelCache={"enabled": cache,
                                              "accessModes": ["ReadWriteMany"]}),
                         "LeaderWorkerSet")
        templates = lws["spec"]["leaderWorkerTemplate"]
        assert "initContainers" in templates["leaderTemplate"]["spec"]
        assert ("initContainers" in templates["workerTemplate"]["spec"]) == worker_fetches


@pytest.mark.parametrize("values, error", [
    ({"models": [{"name": "a", "model": "org/a", "tensorParallelSize": 2},
                 {"name": "b", "model": "org/b", "tensorParallelSize": 2}]},
     "multiNode.enabled serves one model across each group; models lists 2"),
    ({"models": [{"name": "a", "model": "org/a", "tensorParallelSize": 3}]},
     "multiNode.size 2 must divide models[a]'s tensorParallelSize x pipelineParallelSize (3)"),
    ({"models": [{"name": "a", "model": "org/a"}]},
     "multiNode.size 2 must divide models[a]'s tensorParallelSize x pipelineParallelSize (1)"),
    ({"models": [{"name": "a", "model": "org/a", "pipelineParallelSize": 2}],
      "multiNode": {"enabled": True, "joinTimeoutSeconds": 600}},
     "multiNode.joinTimeoutSeconds (600) must be under probes.startup.budgetSeconds (600)"),
])
def test_multi_node_refuses_a_group_that_cannot_split(values, error):
    values = {"modelRepository": {"source": "values"},
              "multiNode": {"enabled": True}, **values}
    with pytest.raises(chart.ChartError, match=re.escape(error)):
        chart.render(values=values)


# ---------------------------------------------------------------------- helm test
def test_helm_test_hooks_call_models_completion_and_streaming_chat():
    manifests = rendered("frontend-only")
    tests = chart.hooks(manifests)
    assert [t["metadata"]["name"].rsplit("-test-", 1)[1] for t in tests] == [
        "chat-stream", "completion", "models"]
    for pod in tests:
        c = pod["spec"]["containers"][0]
        assert c["args"][1:] == ["http://llm-triton-vllm:9000", c["name"], "vllm_model"]
        assert pod["spec"]["restartPolicy"] == "Never"
        assert c["env"][0]["name"] == "OPENAI_API_KEY"

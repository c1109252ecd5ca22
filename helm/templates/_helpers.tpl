{{/* Names: <release>-<chart> unless the release name already holds the chart's. */}}
{{- define "triton-vllm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "triton-vllm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Service of Triton's own endpoints (HTTP, gRPC, metrics). */}}
{{- define "triton-vllm.tritonService" -}}
{{- printf "%s-triton" (include "triton-vllm.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "triton-vllm.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "triton-vllm.labels" -}}
{{ include "triton-vllm.commonLabels" . }}
app.kubernetes.io/name: {{ include "triton-vllm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector of the Triton pods (component server) or the frontend pods (component frontend). */}}
{{- define "triton-vllm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "triton-vllm.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The kind of the Triton pods' workload, decided here alone: a LeaderWorkerSet when one
engine spans several nodes (multiNode), a StatefulSet when each pod keeps a model cache
claim of its own (modelCache.perReplica), else a Deployment. */}}
{{- define "triton-vllm.workloadKind" -}}
{{- if .Values.multiNode.enabled }}LeaderWorkerSet
{{- else if and .Values.modelCache.enabled .Values.modelCache.perReplica }}StatefulSet
{{- else }}Deployment
{{- end }}
{{- end }}

{{/* The Triton pods' workload as an autoscaler's scaleTargetRef (HPA, KEDA). */}}
{{- define "triton-vllm.workloadRef" -}}
{{- $kind := include "triton-vllm.workloadKind" . }}
apiVersion: {{ ternary "leaderworkerset.x-k8s.io/v1" "apps/v1" (eq $kind "LeaderWorkerSet") }}
kind: {{ $kind }}
name: {{ include "triton-vllm.fullname" . }}
{{- end }}

{{- define "triton-vllm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "triton-vllm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "triton-vllm.image" -}}
{{- $img := .Values.image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* The ports the image serves, by name.  The image's entrypoint starts its servers on
these and takes no others (build.py writes them from tritonbuild/ports.py; tests/helm
checks that the two agree); the Services' own ports are values. */}}
{{- define "triton-vllm.imagePorts" -}}
{"http": 8000, "grpc": 8001, "metrics": 8002, "openai": 9000}
{{- end }}

{{/* One of the image's ports: (include "triton-vllm.port" "openai"). */}}
{{- define "triton-vllm.port" -}}
{{- index (include "triton-vllm.imagePorts" . | fromJson) . | int }}
{{- end }}

{{/* The pod-level fields of the release's serving pods (Triton's and the frontend-only
ones).  Called with (dict "root" $ "placement" BOOL): placement adds what puts the Triton
pods on their nodes (runtime class, node selector, tolerations, affinity, spread), which
the frontends, needing only CPUs, go without. */}}
{{- define "triton-vllm.podFields" -}}
{{- $v := .root.Values }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "triton-vllm.serviceAccountName" .root }}
automountServiceAccountToken: {{ $v.serviceAccount.automountToken }}
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if .placement }}
{{- with $v.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* Volumes of every serving pod: where its containers write under a read-only root
($TMPDIR; $HOME, where vLLM and torch keep caches) and the shared model cache claim,
read-only when (dict "root" $ "readOnlyCache" true): frontends only read tokenizers. */}}
{{- define "triton-vllm.podVolumes" -}}
- name: tmp
  emptyDir: {}
- name: home
  emptyDir: {}
{{- with include "triton-vllm.cacheClaim" .root }}
- name: model-cache
  persistentVolumeClaim:
    claimName: {{ . }}
    {{- if $.readOnlyCache }}
    readOnly: true
    {{- end }}
{{- end }}
{{- end }}

{{- define "triton-vllm.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: /home/triton
{{- end }}

{{/* The frontend's readiness, which also requires every model the release serves by
name (health/serving.py in the frontend): Triton up, each of its loaded models READY
(Triton's strict readiness), the named ones among them, their tokenizers loaded. */}}
{{- define "triton-vllm.readyPath" -}}
{{- $query := list }}
{{- range fromJsonArray (include "triton-vllm.modelNames" .) }}
{{- $query = append $query (printf "model=%s" (urlquery .)) }}
{{- end }}
{{- print "/health/ready" (ternary (printf "?%s" (join "&" $query)) "" (gt (len $query) 0)) }}
{{- end }}

{{/* The Secret holding the OpenAI API key, or nothing when the endpoint is open. */}}
{{- define "triton-vllm.apiKeySecret" -}}
{{- if .Values.openai.apiKey.existingSecret }}
{{- .Values.openai.apiKey.existingSecret }}
{{- else if .Values.openai.apiKey.generate }}
{{- printf "%s-api-key" (include "triton-vllm.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding the key of Triton's model-repository API: the user's, or the one
model-control-secret.yaml creates. */}}
{{- define "triton-vllm.modelControlSecret" -}}
{{- default (printf "%s-model-control-key" (include "triton-vllm.fullname" .)) .Values.server.modelControlKey.existingSecret }}
{{- end }}

{{/* The key of Triton's model-repository API, for the processes that call it (the image's
frontend and model watch) and for tritonserver's restriction of it. */}}
{{- define "triton-vllm.modelControlKeyEnv" -}}
- name: TRITON_MODEL_CONTROL_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "triton-vllm.modelControlSecret" . }}
      key: {{ .Values.server.modelControlKey.secretKey }}
{{- end }}

{{/* The release's own pods: Triton's, the frontend's, the helm tests', a multi-node group's. */}}
{{- define "triton-vllm.releasePods" -}}
podSelector:
  matchLabels:
    app.kubernetes.io/name: {{ include "triton-vllm.name" . }}
    app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Seconds the image lets requests in flight finish on SIGTERM: the pod's grace period
less 10 s for both processes to exit, so the kubelet never kills a drain midway. */}}
{{- define "triton-vllm.drainSeconds" -}}
{{- max 1 (sub (int .Values.terminationGracePeriodSeconds) 10) -}}
{{- end }}

{{- define "triton-vllm.apiKeyEnv" -}}
{{- with include "triton-vllm.apiKeySecret" . }}
- name: TRITON_OPENAI_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.openai.apiKey.secretKey }}
{{- end }}
{{- end }}

{{/* The model names clients use: the sample model's, the values' models', or the PVC's listed ones. */}}
{{- define "triton-vllm.modelNames" -}}
{{- $names := list }}
{{- if eq .Values.modelRepository.source "sample" }}
{{- $names = list "vllm_model" }}
{{- else if eq .Values.modelRepository.source "values" }}
{{- range .Values.models }}{{ $names = append $names .name }}{{ end }}
{{- else if eq .Values.modelRepository.source "serve" }}
{{- $names = list (include "triton-vllm.serveModelName" .) }}
{{- else }}
{{- $names = .Values.modelRepository.pvc.modelNames }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/* The claim of the shared model cache (none with perReplica: each pod has its own). */}}
{{- define "triton-vllm.cacheClaim" -}}
{{- if and .Values.modelCache.enabled (not .Values.modelCache.perReplica) }}
{{- default (printf "%s-model-cache" (include "triton-vllm.fullname" .)) .Values.modelCache.existingClaim }}
{{- end }}
{{- end }}

{{/* The spec of a model cache claim: the shared one (model-cache-pvc.yaml) and each pod's
own (the StatefulSet's volumeClaimTemplates). */}}
{{- define "triton-vllm.cacheClaimSpec" -}}
accessModes:
  {{- toYaml .Values.modelCache.accessModes | nindent 2 }}
{{- with .Values.modelCache.storageClassName }}
storageClassName: {{ . }}
{{- end }}
resources:
  requests:
    storage: {{ .Values.modelCache.size }}
{{- end }}

{{/* Where fetched models land: in the cache when there is one, else in an emptyDir. */}}
{{- define "triton-vllm.fetchDir" -}}
{{- if .Values.modelCache.enabled }}{{ .Values.modelCache.mountPath }}/models{{ else }}/model-store{{ end }}
{{- end }}

{{- define "triton-vllm.anyFetch" -}}
{{- range .Values.models }}{{ if .fetch }}true{{ end }}{{ end }}
{{- end }}

{{/* The path the engine loads a model from. */}}
{{- define "triton-vllm.modelSource" -}}
{{- if .model.fetch }}
{{- printf "%s/%s" (include "triton-vllm.fetchDir" .root) .model.name }}
{{- else }}
{{- .model.model }}
{{- end }}
{{- end }}

{{/* Rules the schema cannot say. */}}
{{- define "triton-vllm.validate" -}}
{{- $v := .Values }}
{{- if and $v.autoscaling.enabled $v.keda.enabled }}
{{- fail "autoscaling.enabled and keda.enabled both scale the same pods: turn one off" }}
{{- end }}
{{- if and (eq $v.modelRepository.source "values") (not $v.models) }}
{{- fail "modelRepository.source=values needs at least one entry in models" }}
{{- end }}
{{- if and (ne $v.modelRepository.source "values") $v.models }}
{{- fail (printf "models are used only with modelRepository.source=values (it is %s)" $v.modelRepository.source) }}
{{- end }}
{{- if and (eq $v.modelRepository.source "pvc") (not $v.modelRepository.pvc.claimName) }}
{{- fail "modelRepository.source=pvc needs modelRepository.pvc.claimName" }}
{{- end }}
{{- range $v.models }}
{{- if and (not .fetch) (not .model) }}
{{- fail (printf "models[%s] needs model (a Hugging Face id or a path) or fetch" .name) }}
{{- end }}
{{- if and .fetch (ne .fetch.source "hf") (not .fetch.image) }}
{{- fail (printf "models[%s].fetch.source=%s needs fetch.image (an image with its CLI)" .name .fetch.source) }}
{{- end }}
{{- end }}
{{- if and $v.multiNode.enabled (ne $v.modelRepository.source "values") }}
{{- fail "multiNode.enabled needs modelRepository.source=values (the models' parallel sizes span the group)" }}
{{- end }}
{{- if $v.multiNode.enabled }}
{{- if ne (len $v.models) 1 }}
{{- fail (printf "multiNode.enabled serves one model across each group; models lists %d" (len $v.models)) }}
{{- end }}
{{- $m := index $v.models 0 }}
{{- $world := mul (int (default 1 $m.tensorParallelSize)) (int (default 1 $m.pipelineParallelSize)) }}
{{- if or (lt $world (int $v.multiNode.size)) (ne (mod $world (int $v.multiNode.size)) 0) }}
{{- fail (printf "multiNode.size %d must divide models[%s]'s tensorParallelSize x pipelineParallelSize (%d): each pod runs an equal share of the engine's ranks" (int $v.multiNode.size) $m.name $world) }}
{{- end }}
{{- if ge (int $v.multiNode.joinTimeoutSeconds) (int $v.probes.startup.budgetSeconds) }}
{{- fail (printf "multiNode.joinTimeoutSeconds (%d) must be under probes.startup.budgetSeconds (%d): the leader must report missing workers before its startup probe gives up" (int $v.multiNode.joinTimeoutSeconds) (int $v.probes.startup.budgetSeconds)) }}
{{- end }}
{{- end }}
{{- if and $v.multiNode.enabled $v.modelCache.perReplica }}
{{- fail "multiNode.enabled cannot use modelCache.perReplica: use a shared (ReadWriteMany) cache" }}
{{- end }}
{{- if and $v.ingress.enabled (not $v.ingress.host) }}
{{- fail "ingress.enabled needs ingress.host" }}
{{- end }}
{{- if and $v.httpRoute.enabled (not $v.httpRoute.parentRefs) }}
{{- fail "httpRoute.enabled needs httpRoute.parentRefs (the Gateway to attach to)" }}
{{- end }}
{{- end }}

{{/* The Triton name `serve` gives model.path with model.args (triton_vllm_backend.serve):
the first --served-model-name without a "/", else the folder's last part with characters
outside [A-Za-z0-9_.-] made "_" (tests/helm checks that the two agree). */}}
{{- define "triton-vllm.serveModelName" -}}
{{- $served := "" }}
{{- $args := .Values.model.args }}
{{- range $i, $a := $args }}
{{- if and (eq $a "--served-model-name") (lt (add1 $i) (len $args)) (not $served) }}{{ $served = index $args (add1 $i) }}{{ end }}
{{- if and (hasPrefix "--served-model-name=" $a) (not $served) }}{{ $served = trimPrefix "--served-model-name=" $a }}{{ end }}
{{- end }}
{{- if and $served (not (contains "/" $served)) }}{{ $served }}
{{- else }}
{{- $folder := regexReplaceAll "[^A-Za-z0-9_.-]" (base (trimSuffix "/" .Values.model.path)) "_" }}
{{- regexReplaceAll "^[_.-]+" $folder "" }}
{{- end }}
{{- end }}

{{/* A Prometheus Operator monitor of Triton's metrics port: the ServiceMonitor (through
the <release>-triton Service) and the PodMonitor (the pods themselves) differ in their kind
and the name of their endpoints' list alone.  Called with (dict "root" $ "kind" KIND
"monitor" .Values.metrics.serviceMonitor-or-podMonitor). */}}
{{- define "triton-vllm.monitor" -}}
{{- $root := .root }}
apiVersion: monitoring.coreos.com/v1
kind: {{ .kind }}
metadata:
  name: {{ include "triton-vllm.fullname" $root }}
  labels:
    {{- include "triton-vllm.labels" $root | nindent 4 }}
    {{- with .monitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "triton-vllm.selectorLabels" (dict "root" $root "component" "server") | nindent 6 }}
  {{ ternary "endpoints" "podMetricsEndpoints" (eq .kind "ServiceMonitor") }}:
    - port: metrics
      path: /metrics
      interval: {{ .monitor.interval }}
      metricRelabelings:
        # Triton writes a whole bucket bound as le="1", vLLM's server (prometheus_client)
        # as le="1.0": a query written for `vllm serve` that selects a bucket by its bound
        # finds Triton's in vLLM's spelling.  Prometheus 3 does the same for histograms on
        # ingestion.
        - sourceLabels: [le]
          regex: "([0-9]+)"
          targetLabel: le
          replacement: "${1}.0"
{{- end }}

{{/*
The metadata of every pod template of the release (the Triton pods of a Deployment or
StatefulSet, a LeaderWorkerSet group's leader and workers, the frontend-only pods), written
here alone so that they cannot drift apart: the chart's labels, the selector labels of
the pod's component, podLabels, then the role label of a LeaderWorkerSet's pods; and the
annotations: checksum/models, which restarts the pods that serve the models when their
configuration changes, and podAnnotations.  Called with (dict "root" $ "component" COMPONENT) and, for a
LeaderWorkerSet's pods, "role" ("leader" or "worker").
*/}}
{{- define "triton-vllm.podMetadata" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- /* The frontend-only pods read no model configuration: a change of it leaves them be. */}}
{{- $models := and (eq $v.modelRepository.source "values") (ne .component "frontend") }}
labels:
  {{- include "triton-vllm.commonLabels" $root | nindent 2 }}
  {{- include "triton-vllm.selectorLabels" (dict "root" $root "component" .component) | nindent 2 }}
  {{- with $v.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with .role }}
  role: {{ . }}
  {{- end }}
{{- if or $models $v.podAnnotations }}
annotations:
  {{- if $models }}
  checksum/models: {{ include (print $root.Template.BasePath "/models-configmap.yaml") $root | sha256sum }}
  {{- end }}
  {{- with $v.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The Triton pod: tritonserver + the OpenAI frontend (the image's entrypoint starts both).
Called with (dict "root" $ "role" ROLE): role "server" for a Deployment/StatefulSet pod,
"leader" or "worker" for a LeaderWorkerSet group's pods.
*/}}
{{- define "triton-vllm.serverPodSpec" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $role := .role }}
{{- include "triton-vllm.podFields" (dict "root" $root "placement" true) }}
{{- /* A group's workers load their ranks' weights from their own disk: they fetch too,
       unless the model cache (shared by the group) has what the leader fetched. */}}
{{- if and (include "triton-vllm.anyFetch" $root) (or (ne $role "worker") (not $v.modelCache.enabled)) }}
initContainers:
{{- range $v.models }}
{{- if .fetch }}
{{- $dest := printf "%s/%s" (include "triton-vllm.fetchDir" $root) .name }}
  - name: fetch-{{ .name | lower | replace "_" "-" | trunc 50 | trimSuffix "-" }}
    image: {{ default (include "triton-vllm.image" $root) .fetch.image }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    {{- if eq .fetch.source "hf" }}
    command:
      - python3
      - -c
      - |
        import sys
        from huggingface_hub import snapshot_download
        snapshot_download(repo_id=sys.argv[1], local_dir=sys.argv[2])
      - {{ .fetch.uri | quote }}
      - {{ $dest | quote }}
    {{- else if eq .fetch.source "s3" }}
    command: [aws, s3, sync, {{ .fetch.uri | quote }}, {{ $dest | quote }}]
    {{- else }}
    command: [gcloud, storage, rsync, --recursive, {{ .fetch.uri | quote }}, {{ $dest | quote }}]
    {{- end }}
    env:
      - name: HOME
        value: /tmp
      - name: HF_HOME
        value: /tmp/huggingface
      {{- if and (eq .fetch.source "gcs") .fetch.credentialsSecret }}
      - name: CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE
        value: /var/run/secrets/model-fetch/{{ .fetch.credentialsKey | default "key.json" }}
      {{- end }}
    {{- with .fetch.credentialsSecret }}
    envFrom:
      - secretRef:
          name: {{ . }}
    {{- end }}
    securityContext:
      {{- toYaml $v.securityContext | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
      {{- if $v.modelCache.enabled }}
      - name: model-cache
        mountPath: {{ $v.modelCache.mountPath }}
      {{- else }}
      - name: model-store
        mountPath: /model-store
      {{- end }}
      {{- if and (eq .fetch.source "gcs") .fetch.credentialsSecret }}
      - name: fetch-credentials-{{ .name | lower | replace "_" "-" | trunc 40 | trimSuffix "-" }}
        mountPath: /var/run/secrets/model-fetch
        readOnly: true
      {{- end }}
{{- end }}
{{- end }}
{{- end }}
containers:
  - name: {{ if eq $role "worker" }}engine-worker{{ else }}triton{{ end }}
    image: {{ include "triton-vllm.image" $root }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    {{- /* Arguments only, never `command`: the image's entrypoint (NVIDIA's in front of
           it in the GPU image) starts every container. */}}
    {{- if eq $role "worker" }}
    # `vllm serve --headless` for this worker's ranks of the models file's one model,
    # once it has joined the leader's group (LWS_LEADER_ADDRESS, LWS_WORKER_INDEX).
    args: [worker, --models, /etc/triton-vllm/models.yaml]
    {{- end }}
    {{- if ne $role "worker" }}
    {{- $args := list }}
    {{- if $v.server.engineHealthCheck }}
    {{- $args = concat $args (list "--model-control-mode=explicit" "--load-model=*") }}
    {{- end }}
    {{- $args = concat $args $v.server.extraArgs }}
    {{- /* The image's serve makes the repository (in the tmp volume) from the model's
           flags, or from the models file the chart wrote from `models`
           (models-configmap.yaml); what follows `--` is tritonserver's. */}}
    {{- $serve := list }}
    {{- if eq $v.modelRepository.source "serve" }}
    {{- $serve = concat (list "serve" $v.model.path) $v.model.args }}
    {{- else if eq $v.modelRepository.source "values" }}
    {{- $serve = list "serve" "--models" "/etc/triton-vllm/models.yaml" }}
    {{- end }}
    {{- if $serve }}
    {{- $args = ternary (concat $serve (list "--") $args) $serve (gt (len $args) 0) }}
    {{- end }}
    {{- with $args }}
    args:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    ports:
      {{- range $name := list "http" "grpc" "metrics" "openai" }}
      - name: {{ $name }}
        containerPort: {{ include "triton-vllm.port" $name }}
      {{- end }}
      {{- if eq $role "leader" }}
      - name: dist
        containerPort: {{ $v.multiNode.masterPort }}
      - name: group
        containerPort: {{ $v.multiNode.groupPort }}
      {{- end }}
    {{- end }}
    env:
      {{- if eq $v.modelRepository.source "pvc" }}
      - name: MODEL_REPOSITORY
        value: /models
      {{- end }}
      {{- if $v.server.engineHealthCheck }}
      - name: ENABLE_VLLM_HEALTH_CHECK
        value: "true"
      {{- end }}
      - name: SHUTDOWN_GRACE_SECONDS
        value: {{ include "triton-vllm.drainSeconds" $root | quote }}
      {{- if $v.multiNode.enabled }}
      # The group: where the workers join the leader, and how long it waits for them.
      - name: TRITON_VLLM_GROUP_PORT
        value: {{ $v.multiNode.groupPort | quote }}
      - name: TRITON_VLLM_GROUP_JOIN_SECONDS
        value: {{ $v.multiNode.joinTimeoutSeconds | quote }}
      {{- end }}
      {{- if $v.modelCache.enabled }}
      - name: HF_HOME
        value: {{ $v.modelCache.mountPath }}/huggingface
      {{- end }}
      {{- if include "triton-vllm.downloadsFromHub" $root }}
      # The image never reaches the hub (HF_HUB_OFFLINE=1) but for a model named by its
      # hub id, which vLLM downloads (into the model cache when there is one).
      - name: HF_HUB_OFFLINE
        value: "0"
      {{- end }}
      {{- with include "triton-vllm.apiKeyEnv" $root }}{{ . | trim | nindent 6 }}{{ end }}
      {{- if ne $role "worker" }}
      {{- include "triton-vllm.modelControlKeyEnv" $root | nindent 6 }}
      {{- end }}
      {{- with $v.server.env }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- if ne $role "worker" }}
    # Model load: the frontend is ready once Triton and its models are.
    startupProbe:
      httpGet:
        path: {{ include "triton-vllm.readyPath" $root | quote }}
        port: openai
      periodSeconds: {{ $v.probes.startup.periodSeconds }}
      timeoutSeconds: 5
      failureThreshold: {{ div (add $v.probes.startup.budgetSeconds $v.probes.startup.periodSeconds -1) $v.probes.startup.periodSeconds }}
    # The frontend ready, Triton ready (every model it loaded READY) and serving each of
    # the release's models: one GET, nothing started in the container.  A model whose
    # engine or stub died exits the container (the image's model watch).
    readinessProbe:
      httpGet:
        path: {{ include "triton-vllm.readyPath" $root | quote }}
        port: openai
      periodSeconds: {{ $v.probes.readiness.periodSeconds }}
      timeoutSeconds: {{ $v.probes.readiness.timeoutSeconds }}
      failureThreshold: {{ $v.probes.readiness.failureThreshold }}
    # Fails when Triton cannot be reached or a model says its engine or stub is dead
    # (triton_vllm_backend/watch.py); a model that is only busy passes.
    livenessProbe:
      exec:
        command:
          - env
          - PYTHONPATH=/opt/tritonserver/backends/vllm
          - python3
          - -m
          - triton_vllm_backend.watch
          - --once
          - --timeout={{ $v.probes.liveness.timeoutSeconds }}
      periodSeconds: {{ $v.probes.liveness.periodSeconds }}
      timeoutSeconds: {{ $v.probes.liveness.timeoutSeconds }}
      failureThreshold: {{ $v.probes.liveness.failureThreshold }}
    {{- end }}
    resources:
      {{- $res := deepCopy $v.resources }}
      {{- if gt (int $v.gpu.count) 0 }}
      {{- $limits := default dict $res.limits }}
      {{- $_ := set $limits $v.gpu.resourceName (int $v.gpu.count) }}
      {{- $_ := set $res "limits" $limits }}
      {{- $requests := default dict $res.requests }}
      {{- $_ := set $requests $v.gpu.resourceName (int $v.gpu.count) }}
      {{- $_ := set $res "requests" $requests }}
      {{- end }}
      {{- toYaml $res | nindent 6 }}
    securityContext:
      {{- toYaml $v.securityContext | nindent 6 }}
    volumeMounts:
      {{- include "triton-vllm.scratchMounts" . | nindent 6 }}
      - name: shm
        mountPath: /dev/shm
      {{- if eq $v.modelRepository.source "values" }}
      - name: model-repository
        mountPath: /etc/triton-vllm
        readOnly: true
      {{- else if eq $v.modelRepository.source "pvc" }}
      - name: model-repository
        mountPath: /models
        readOnly: true
        {{- with $v.modelRepository.pvc.subPath }}
        subPath: {{ . }}
        {{- end }}
      {{- end }}
      {{- if $v.modelCache.enabled }}
      - name: model-cache
        mountPath: {{ $v.modelCache.mountPath }}
      {{- else if include "triton-vllm.anyFetch" $root }}
      - name: model-store
        mountPath: /model-store
        readOnly: true
      {{- end }}
volumes:
  {{- include "triton-vllm.podVolumes" (dict "root" $root) | nindent 2 }}
  - name: shm
    emptyDir:
      medium: Memory
      sizeLimit: {{ $v.shm.sizeLimit }}
  {{- if eq $v.modelRepository.source "values" }}
  - name: model-repository
    configMap:
      name: {{ include "triton-vllm.fullname" $root }}-models
      items:
        - key: models.yaml
          path: models.yaml
  {{- else if eq $v.modelRepository.source "pvc" }}
  - name: model-repository
    persistentVolumeClaim:
      claimName: {{ $v.modelRepository.pvc.claimName }}
      readOnly: true
  {{- end }}
  {{- if and (include "triton-vllm.anyFetch" $root) (not $v.modelCache.enabled) }}
  - name: model-store
    emptyDir: {}
  {{- end }}
  {{- range $v.models }}
  {{- if and .fetch (eq .fetch.source "gcs") .fetch.credentialsSecret }}
  - name: fetch-credentials-{{ .name | lower | replace "_" "-" | trunc 40 | trimSuffix "-" }}
    secret:
      secretName: {{ .fetch.credentialsSecret }}
  {{- end }}
  {{- end }}
{{- end }}

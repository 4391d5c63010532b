{{/*
hub-follower.inject: the one include a parent chart needs.

The parent keeps its worker Deployment template as it is, moves it into a `define`,
and renders it through this template:

  {{- define "kubeslice-worker.operator" -}}
  ...the unchanged template...
  {{- end -}}
  {{ include "hub-follower.inject" (dict "root" . "manifests" (include "kubeslice-worker.operator" .)) }}

`manifests` is a string of one or more YAML documents. While hubFollower.enabled is
false it is returned as it is, byte for byte. Otherwise every document is parsed
(fromYaml, split on `---` lines); the Deployment whose pod template has the worker
container (hubFollower.worker.container, default `manager`) is patched as data and
written back with toYaml; every other document is returned as it was. After them come
the documents hub-follower renders itself: the secondary hub's Secret
(secondary.controllerSecret), the Role and RoleBinding for Events (events.enabled and
events.rbac.create), the PodMonitor (metrics.podMonitor.enabled), the PrometheusRule
(metrics.prometheusRule.enabled) and the Grafana dashboard's ConfigMap
(dashboard.enabled).

The patch adds the sidecar (a native sidecar in initContainers, or a regular
container after the worker), the hub-follower-install init container (execWrapper),
the handoff, secondary-credential and binary volumes and the worker's mounts of them,
HUB_HANDOFF_DIR in the worker's env, the exec wrapper around the worker's command, the
/worker/livez livenessProbe (liveness mode), shareProcessNamespace and the worker's
runAsUser (signal mode), and pod annotations that are not there yet. The sidecar's
HUB_HOST_ENDPOINT, HUB_PROJECT_NAMESPACE, CLUSTER_NAME, HUB_TOKEN_FILE and HUB_CA_FILE
are the worker's own env entries, copied as they are, unless hubFollower.* sets them;
it mounts the worker's own volume that holds the token file, at the same path.
*/}}
{{- define "hub-follower.inject" -}}
{{- if not (and (kindIs "map" .) (hasKey . "root") (hasKey . "manifests")) -}}
{{- fail "hub-follower.inject takes (dict \"root\" . \"manifests\" (include \"<your worker template>\" .))" -}}
{{- end -}}
{{- $root := .root -}}
{{- $text := toString .manifests -}}
{{- if not (include "hub-follower.enabled" $root) -}}
{{- $text -}}
{{- else -}}
{{- $hf := $root.Values.hubFollower -}}
{{- $name := $hf.worker.container -}}
{{- $out := list -}}
{{- $target := dict -}}
{{- range $raw := regexSplit "(?m)^---[ \\t]*(#.*)?$" $text -1 -}}
{{- $body := trimAll "\n" $raw -}}
{{- if trim $body -}}
{{- $obj := fromYaml $body -}}
{{- if and (hasKey $obj "Error") (eq (len $obj) 1) -}}
{{- fail (printf "hub-follower.inject: a document in the manifests is not valid YAML (%s):\n%s" $obj.Error $body) -}}
{{- end -}}
{{- $isWorker := false -}}
{{- if eq (toString $obj.kind) "Deployment" -}}
{{- range (dig "spec" "template" "spec" "containers" (list) $obj) -}}
{{- if eq (toString .name) $name }}{{ $isWorker = true }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if $isWorker -}}
{{- if $target -}}
{{- fail (printf "hub-follower.inject: more than one Deployment has a container named %q (hubFollower.worker.container); wrap only the worker's" $name) -}}
{{- end -}}
{{- $target = $obj -}}
{{- $out = append $out (dict "worker" $obj) -}}
{{- else -}}
{{- $out = append $out (dict "raw" $body) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $target -}}
{{- fail (printf "hub-follower.inject: no Deployment in the manifests has a container named %q; set hubFollower.worker.container to the worker container's name" $name) -}}
{{- end -}}
{{- $extra := include "hub-follower.patch" (dict "root" $root "deployment" $target) -}}
{{- $docs := list -}}
{{- range $out -}}
{{- if hasKey . "worker" -}}
{{- $docs = append $docs (toYaml .worker) -}}
{{- else -}}
{{- $docs = append $docs .raw -}}
{{- end -}}
{{- end -}}
{{- with $extra }}{{ $docs = append $docs . }}{{ end -}}
{{- join "\n---\n" $docs -}}
{{- end -}}
{{- end -}}

{{/*
Patches the worker Deployment in place (takes (dict "root" $ "deployment" MAP)) and
renders the extra documents hub-follower adds, joined by `---`.
*/}}
{{- define "hub-follower.patch" -}}
{{- $root := .root -}}
{{- $hf := $root.Values.hubFollower -}}
{{- $dep := .deployment -}}
{{- $tmpl := $dep.spec.template -}}
{{- $pod := $tmpl.spec -}}
{{- $name := $hf.worker.container -}}
{{- $worker := dict -}}
{{- range $pod.containers }}{{ if eq (toString .name) $name }}{{ $worker = . }}{{ end }}{{ end -}}
{{- $mode := $hf.restart.mode -}}

{{- /* The worker's UID: its runAsUser, or the pod's; when neither is set,
restart.workerUID, which signal mode writes onto the worker so that the sidecar's
same-UID signal holds by construction, not by the image's default user. */ -}}
{{- $csc := $worker.securityContext | default dict -}}
{{- $psc := $pod.securityContext | default dict -}}
{{- $workerUID := $hf.restart.workerUID | int64 -}}
{{- if hasKey $csc "runAsUser" -}}
{{- $workerUID = $csc.runAsUser | int64 -}}
{{- else if hasKey $psc "runAsUser" -}}
{{- $workerUID = $psc.runAsUser | int64 -}}
{{- else if eq $mode "signal" -}}
{{- $_ := set $csc "runAsUser" $workerUID -}}
{{- $_ := set $worker "securityContext" $csc -}}
{{- end -}}

{{- /* The primary hub: the worker's own env entries unless values override. */ -}}
{{- $wenv := dict -}}
{{- range ($worker.env | default list) }}{{ $_ := set $wenv (toString .name) . }}{{ end -}}
{{- $primaryEnv := include "hub-follower.primaryEnv" (dict "root" $root "hf" $hf "workerEnv" $wenv "workerName" $name) | fromYamlArray -}}
{{- $primary := dict -}}
{{- range $primaryEnv }}{{ $_ := set $primary .name . }}{{ end -}}
{{- $primaryEndpoint := "" -}}
{{- if hasKey $primary.HUB_HOST_ENDPOINT "value" }}{{ $primaryEndpoint = toString $primary.HUB_HOST_ENDPOINT.value }}{{ end -}}
{{- $c := dict "root" $root "hf" $hf "native" (eq (include "hub-follower.native" $root) "true") "workerUID" $workerUID "primaryEndpoint" $primaryEndpoint -}}
{{- include "hub-follower.validate" $c -}}

{{- /* The pod's volumes, checked for names hub-follower needs. */ -}}
{{- $volumes := $pod.volumes | default list -}}
{{- $volumeNames := dict -}}
{{- range $volumes }}{{ $_ := set $volumeNames (toString .name) true }}{{ end -}}
{{- $newVolumes := include "hub-follower.volumes" $c | fromYamlArray -}}
{{- range $newVolumes -}}
{{- if hasKey $volumeNames .name -}}
{{- fail (printf "hub-follower.inject: the pod already has a volume named %q, which hub-follower needs for itself" .name) -}}
{{- end -}}
{{- end -}}

{{- /* The primary credential: mount in the sidecar, at the same path, whatever the
worker mounts at the token and CA files' directories (the longest mountPath that
holds each file), or primary.volumeName there. */ -}}
{{- $workerMounts := $worker.volumeMounts | default list -}}
{{- $primaryMounts := list -}}
{{- $seen := dict -}}
{{- range $var := list "HUB_TOKEN_FILE" "HUB_CA_FILE" -}}
{{- $file := toString (get $primary $var).value -}}
{{- $dir := dir $file -}}
{{- $m := dict -}}
{{- if $hf.primary.volumeName -}}
{{- if not (hasKey $volumeNames $hf.primary.volumeName) -}}
{{- fail (printf "hubFollower.primary.volumeName: the pod has no volume %q; name the worker's volume that holds the primary hub's token and ca.crt, or leave it empty to use the one the worker mounts at %s" $hf.primary.volumeName $dir) -}}
{{- end -}}
{{- $m = dict "name" $hf.primary.volumeName "mountPath" $dir -}}
{{- else -}}
{{- $best := "" -}}
{{- range $workerMounts -}}
{{- $mp := trimSuffix "/" (toString .mountPath) -}}
{{- if and (or (eq $mp $dir) (hasPrefix (printf "%s/" $mp) $file)) (gt (len $mp) (len $best)) -}}
{{- $best = $mp -}}
{{- $m = deepCopy . -}}
{{- end -}}
{{- end -}}
{{- if not $m -}}
{{- fail (printf "hubFollower.primary.volumeName: the worker container %s mounts nothing that holds its %s %s; set hubFollower.primary.volumeName to the volume with the primary hub's token and ca.crt" $name $var $file) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $m "readOnly" true -}}
{{- if not (hasKey $seen (toString $m.mountPath)) -}}
{{- $_ := set $seen (toString $m.mountPath) true -}}
{{- $primaryMounts = append $primaryMounts $m -}}
{{- end -}}
{{- end -}}

{{- /* The sidecar and the installer. */ -}}
{{- $sidecar := include "hub-follower.sidecar" $c | fromYaml -}}
{{- $_ := set $sidecar "env" (concat $primaryEnv $sidecar.env) -}}
{{- $_ := set $sidecar "volumeMounts" (concat (list (first $sidecar.volumeMounts)) $primaryMounts (rest $sidecar.volumeMounts)) -}}
{{- $inits := $pod.initContainers | default list -}}
{{- if $hf.execWrapper -}}
{{- $inits = append $inits (include "hub-follower.installer" $c | fromYaml) -}}
{{- end -}}
{{- if $c.native -}}
{{- $inits = append $inits $sidecar -}}
{{- else -}}
{{- $_ := set $pod "containers" (append $pod.containers $sidecar) -}}
{{- end -}}
{{- if $inits }}{{ $_ := set $pod "initContainers" $inits }}{{ end -}}
{{- $_ := set $pod "volumes" (concat $volumes $newVolumes) -}}

{{- /* The worker: handoff env, mounts, command wrapper, liveness probe. */ -}}
{{- $env := list -}}
{{- range ($worker.env | default list) }}{{ if ne (toString .name) "HUB_HANDOFF_DIR" }}{{ $env = append $env . }}{{ end }}{{ end -}}
{{- $_ := set $worker "env" (append $env (dict "name" "HUB_HANDOFF_DIR" "value" (toString $hf.handoff.dir))) -}}
{{- $_ := set $worker "volumeMounts" (concat $workerMounts (include "hub-follower.workerVolumeMounts" $c | fromYamlArray)) -}}
{{- if $hf.execWrapper -}}
{{- if not $worker.command -}}
{{- fail (printf "hubFollower.execWrapper: the worker container %s has no `command` to wrap (it runs its image's entrypoint); give it its command, e.g. [/manager], or set execWrapper: false" $name) -}}
{{- end -}}
{{- $wrap := list (include "hub-follower.binPath" $root) "exec" "--wait" (toString $hf.exec.wait) -}}
{{- if $hf.exec.kubeconfig }}{{ $wrap = append $wrap "--kubeconfig" }}{{ end -}}
{{- $_ := set $worker "command" (concat $wrap (list "--") $worker.command) -}}
{{- end -}}
{{- if eq $mode "liveness" -}}
{{- $_ := set $worker "livenessProbe" (include "hub-follower.workerLivenessProbe" $root | fromYaml) -}}
{{- end -}}

{{- /* The pod: process namespace and annotations. */ -}}
{{- if eq $mode "signal" }}{{ $_ := set $pod "shareProcessNamespace" true }}{{ end -}}
{{- if $hf.metrics.scrapeAnnotations -}}
{{- if not (kindIs "map" $tmpl.metadata) }}{{ $_ := set $tmpl "metadata" dict }}{{ end -}}
{{- $ann := $tmpl.metadata.annotations | default dict -}}
{{- $owned := false -}}
{{- range $k, $_ := $ann }}{{ if hasPrefix "prometheus.io/" $k }}{{ $owned = true }}{{ end }}{{ end -}}
{{- /* A pod has one set of prometheus.io annotations. When the worker's are there
they stay, and the sidecar is scraped through metrics.podMonitor (or any scrape
configuration that selects the container port named hub-follower). */ -}}
{{- if not $owned -}}
{{- $_ := set $ann "prometheus.io/scrape" "true" -}}
{{- $_ := set $ann "prometheus.io/port" (printf "%d" ($hf.port | int64)) -}}
{{- $_ := set $ann "prometheus.io/path" "/metrics" -}}
{{- $_ := set $tmpl.metadata "annotations" $ann -}}
{{- end -}}
{{- end -}}

{{- /* Extra documents. */ -}}
{{- $namespace := dig "metadata" "namespace" $root.Release.Namespace $dep -}}
{{- $extra := list -}}
{{- with include "hub-follower.secondarySecret" (dict "root" $root "namespace" $namespace) }}{{ $extra = append $extra . }}{{ end -}}
{{- with include "hub-follower.eventsRBAC" (dict "root" $root "namespace" $namespace "deployment" $dep) }}{{ $extra = append $extra . }}{{ end -}}
{{- with include "hub-follower.podMonitor" (dict "root" $root "namespace" $namespace "deployment" $dep) }}{{ $extra = append $extra . }}{{ end -}}
{{- with include "hub-follower.prometheusRule" $root }}{{ $extra = append $extra . }}{{ end -}}
{{- with include "hub-follower.dashboard" $root }}{{ $extra = append $extra . }}{{ end -}}
{{- join "\n---\n" $extra -}}
{{- end -}}

{{/* The secondary hub's credential Secret, rendered from
secondary.controllerSecret (base64 `token`, `ca.crt`, and optionally `endpoint`),
like the kubeslice-worker chart's controllerSecret. Nothing when it is empty. */}}
{{- define "hub-follower.secondarySecret" -}}
{{- $hf := .root.Values.hubFollower -}}
{{- $cs := $hf.secondary.controllerSecret | default dict -}}
{{- if $cs.token -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ $hf.secondary.secretName }}
  namespace: {{ .namespace }}
  labels:
    app.kubernetes.io/name: hub-follower
    app.kubernetes.io/instance: {{ .root.Release.Name }}
    app.kubernetes.io/managed-by: {{ .root.Release.Service }}
type: Opaque
data:
  token: {{ $cs.token | quote }}
  ca.crt: {{ index $cs "ca.crt" | quote }}
  {{- with $cs.endpoint }}
  endpoint: {{ . | quote }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/* A monitoring.coreos.com/v1 PodMonitor for the sidecar's /metrics on the port
named hub-follower, selecting the worker's pods by the Deployment's selector. For
pods whose prometheus.io annotations belong to the worker. */}}
{{- define "hub-follower.podMonitor" -}}
{{- $hf := .root.Values.hubFollower -}}
{{- $pm := $hf.metrics.podMonitor | default dict -}}
{{- if $pm.enabled -}}
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ printf "%s-hub-follower" .root.Release.Name | trunc 63 | trimSuffix "-" }}
  namespace: {{ .namespace }}
  labels:
    app.kubernetes.io/name: hub-follower
    app.kubernetes.io/instance: {{ .root.Release.Name }}
    app.kubernetes.io/managed-by: {{ .root.Release.Service }}
    {{- with $pm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    {{- toYaml .deployment.spec.selector | nindent 4 }}
  namespaceSelector:
    matchNames:
      - {{ .namespace }}
  podMetricsEndpoints:
    - port: hub-follower
      path: /metrics
      {{- with $pm.interval }}
      interval: {{ . }}
      {{- end }}
{{- end -}}
{{- end -}}

{{/* Lines for the parent's NOTES.txt: {{ include "hub-follower.notes" . }} */}}
{{- define "hub-follower.notes" -}}
{{- $hf := .Values.hubFollower -}}
{{- if include "hub-follower.enabled" . -}}
{{- $native := include "hub-follower.native" . -}}
hub-follower is on: restart mode {{ $hf.restart.mode }}, {{ if $native }}native sidecar{{ else }}regular sidecar container{{ end }} (Kubernetes {{ .Capabilities.KubeVersion.Version }}), exec wrapper {{ if $hf.execWrapper }}on{{ else }}off{{ end }}.
  Status:  kubectl -n {{ .Release.Namespace }} port-forward deploy/<worker> {{ $hf.port | int64 }}
           then: curl localhost:{{ $hf.port | int64 }}/status
{{- if include "hub-follower.twoHubs" . }}
  The Secret {{ $hf.secondary.secretName | quote }} must hold `token` and `ca.crt` for the secondary hub{{ with $hf.secondary.endpoint }} {{ . }}{{ end }}{{ if $hf.secondary.controllerSecret.token }} (rendered from secondary.controllerSecret){{ end }}.
  On both hubs the worker's hub identity needs {{ if $hf.watch.enabled }}get, list and watch{{ else }}get{{ end }} on
  clusters.controller.kubeslice.io/{{ with tpl (toString $hf.clusterName) . }}{{ . }}{{ else }}<the worker's CLUSTER_NAME>{{ end }} in the project namespace
  (docs/helm.md, "RBAC on both hubs").
{{- else }}
  Single-hub mode (no secondary hub): the sidecar publishes the primary hub
  and follows no failover. No PrometheusRule is rendered.
{{- end }}
{{- if not $hf.execWrapper }}
  WARNING: execWrapper=false is only for a worker that reads the handoff files
  ({{ $hf.handoff.dir }}/active-hub.json) itself; today's worker-operator doesn't: it reads
  HUB_HOST_ENDPOINT from its env, so after a switch it reconnects to the old hub.
{{- if not $native }}
  With a regular sidecar container too, nothing holds the worker back until the first
  decision is published: the worker must itself wait for {{ $hf.handoff.dir }}/active-hub.json.
{{- end }}
{{- end }}
{{- if eq $hf.restart.mode "none" }}
  restart.mode=none: after a switch the worker keeps its old hub until something else
  restarts it (kubeslice_worker_hub_worker_on_current_decision shows when).
{{- end }}
{{- if and $hf.metrics.scrapeAnnotations (not $hf.metrics.podMonitor.enabled) }}
  Metrics: the sidecar's prometheus.io annotations are added only to a pod that has
  none; where the worker has its own, scrape port hub-follower with metrics.podMonitor.
{{- end }}
{{- end -}}
{{- end -}}

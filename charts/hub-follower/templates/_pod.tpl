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
(hub-follower.documents: line breaks made LF, split on `---` and `...` lines); the
Deployment or StatefulSet whose pod template has the worker container
(hubFollower.worker.container, default `manager`) is patched as data and written back
with toYaml; every other document is returned as it was. After them come
the documents hub-follower renders itself: the secondary hub's Secret
(secondary.controllerSecret), the Role and RoleBinding for Events (events.enabled and
events.rbac.create), the PodMonitor (metrics.podMonitor.enabled), the PrometheusRule
(metrics.prometheusRule.enabled) and the Grafana dashboard's ConfigMap
(dashboard.enabled).

The patch adds the sidecar (a native sidecar in initContainers, or a regular
container after the worker), the hub-follower-install init container (execWrapper),
the handoff, secondary-credential, hubs' credential (hubFollower.hubs) and binary
volumes and the worker's mounts of them, the downward-API volume of the pin and drain
annotations (overrides.enabled, with two hubs or more; the sidecar's alone),
HUB_HANDOFF_DIR in the worker's env, the exec wrapper around the worker's command, the
/worker/livez livenessProbe with the worker's own probe handed to the sidecar
(liveness mode), shareProcessNamespace and the worker's
runAsUser (signal mode), the sidecar's RestartAllContainers rule (restart-all mode,
which changes nothing else of the worker), and pod annotations that are not there yet. The sidecar's
HUB_HOST_ENDPOINT, HUB_PROJECT_NAMESPACE, CLUSTER_NAME, HUB_TOKEN_FILE and HUB_CA_FILE
are the worker's own env entries, copied as they are, unless hubFollower.* sets them;
it mounts the worker's own volume that holds the token file, at the same path.
*/}}
{{- define "hub-follower.inject" -}}
{{- if not (and (kindIs "map" .) (hasKey . "root") (hasKey . "manifests")) -}}
{{- fail "hub-follower.inject takes (dict \"root\" . \"manifests\" (include \"<your worker template>\" .))" -}}
{{- end -}}
{{- $root := .root -}}
{{- if not (include "hub-follower.enabled" $root) -}}
{{- toString .manifests -}}
{{- else -}}
{{- $out := list -}}
{{- $target := dict -}}
{{- range $obj := include "hub-follower.documents" . | fromJsonArray -}}
{{- if include "hub-follower.isWorker" (dict "root" $root "obj" $obj) -}}
{{- $target = $obj -}}
{{- $out = append $out (dict "worker" $obj) -}}
{{- else -}}
{{- $out = append $out (dict "raw" $obj.body) -}}
{{- end -}}
{{- end -}}
{{- $extra := include "hub-follower.patch" (dict "root" $root "deployment" $target) -}}
{{- $docs := list -}}
{{- range $out -}}
{{- if hasKey . "worker" -}}
{{- $worker := omit .worker "body" -}}
{{- $docs = append $docs (toYaml $worker) -}}
{{- else -}}
{{- $docs = append $docs .raw -}}
{{- end -}}
{{- end -}}
{{- with $extra }}{{ $docs = append $docs . }}{{ end -}}
{{- join "\n---\n" $docs -}}
{{- end -}}
{{- end -}}

{{/*
The parent's manifests as a JSON list of their documents (takes the inject dict), each
the parsed object with its text under "body". It fails rather than let two documents
run together or the worker go missing:

- Line breaks are normalized first (CRLF, CR and the other breaks YAML 1.1 knows
  become LF), so a separator line is found whatever the parent's line endings; a
  `---\r` line left in a document would make the YAML parser read only its first half.
- Documents are split on every `---` line and on `...` (document end) lines. A
  separator that carries anything but a comment (`--- !tag`, `--- |`, `--- {}`) is
  refused: its content would start a document the split cannot keep whole.
- Exactly one Deployment or StatefulSet must have the worker container.
*/}}
{{- define "hub-follower.documents" -}}
{{- $root := .root -}}
{{- $name := $root.Values.hubFollower.worker.container -}}
{{- $text := toString .manifests | replace "\r\n" "\n" | replace "\r" "\n" | replace "\u0085" "\n" | replace "\u2028" "\n" | replace "\u2029" "\n" -}}
{{- range $sep := regexFindAll "(?m)^---[ \\t].*$" $text -1 -}}
{{- $rest := trim (trimPrefix "---" $sep) -}}
{{- if and $rest (not (hasPrefix "#" $rest)) -}}
{{- fail (printf "hub-follower.inject: the document separator %q carries content (a tag, or the start of the document); write `---` alone on its line and the document from the next line on, so that no two documents are read as one" $sep) -}}
{{- end -}}
{{- end -}}
{{- $objs := list -}}
{{- $seen := list -}}
{{- $workers := list -}}
{{- range $raw := regexSplit "(?m)^(---([ \\t].*)?|\\.\\.\\.[ \\t]*(#.*)?)$" $text -1 -}}
{{- $body := trimAll "\n" $raw -}}
{{- if trim $body -}}
{{- $obj := fromYaml $body -}}
{{- if and (hasKey $obj "Error") (eq (len $obj) 1) -}}
{{- fail (printf "hub-follower.inject: a document in the manifests is not valid YAML (%s):\n%s" $obj.Error $body) -}}
{{- end -}}
{{- /* A document of comments only is passed on and counts as no object. */ -}}
{{- if $obj -}}
{{- $seen = append $seen (printf "%s %s" (toString ($obj.kind | default "(no kind)")) (toString (dig "metadata" "name" "(no name)" $obj))) -}}
{{- if include "hub-follower.isWorker" (dict "root" $root "obj" $obj) -}}
{{- $workers = append $workers (printf "%s %s" $obj.kind (toString (dig "metadata" "name" "" $obj))) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $obj "body" $body -}}
{{- $objs = append $objs $obj -}}
{{- end -}}
{{- end -}}
{{- if not $seen -}}
{{- fail (printf "hub-follower.inject: the manifests are empty: the worker's template rendered nothing, so there is no Deployment or StatefulSet with a container named %q to add hub-follower to. Render the worker through hub-follower.inject, or set hubFollower.enabled: false" $name) -}}
{{- end -}}
{{- if not $workers -}}
{{- fail (printf "hub-follower.inject: no Deployment or StatefulSet in the manifests has a container named %q (hubFollower.worker.container); they hold only: %s. Pass the worker's Deployment through hub-follower.inject, or set hubFollower.worker.container to the worker container's name" $name (join ", " $seen)) -}}
{{- end -}}
{{- if gt (len $workers) 1 -}}
{{- fail (printf "hub-follower.inject: more than one workload has a container named %q (hubFollower.worker.container): %s; wrap only the worker's" $name (join ", " $workers)) -}}
{{- end -}}
{{- toJson $objs -}}
{{- end -}}

{{/* "true" when the object (takes (dict "root" $ "obj" MAP)) is a Deployment or a
StatefulSet whose pod template has the worker container. The patch touches only the
pod template, which both kinds have at spec.template. */}}
{{- define "hub-follower.isWorker" -}}
{{- $name := .root.Values.hubFollower.worker.container -}}
{{- if has (toString .obj.kind) (list "Deployment" "StatefulSet") -}}
{{- range (dig "spec" "template" "spec" "containers" (list) .obj) -}}
{{- if eq (toString .name) $name }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Patches the worker Deployment or StatefulSet in place (takes (dict "root" $
"deployment" MAP); the patch reads and changes only its pod template) and
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
{{- $handover := dict -}}
{{- $probeEnv := list -}}
{{- /* The sidecar judges the worker process the exec wrapper acknowledges, so the probe
is handed over only with the wrapper; without it the worker's own liveness is the gate's. */ -}}
{{- if and (eq $mode "liveness") $hf.execWrapper -}}
{{- $handover = include "hub-follower.workerProbeHandover" (dict "root" $root "worker" $worker) | fromYaml -}}
{{- if $handover.target -}}
{{- $probeEnv = list (dict "name" "HUB_WORKER_PROBE" "value" $handover.target) (dict "name" "HUB_WORKER_PROBE_TIMEOUT" "value" (printf "%ds" ($handover.timeoutSeconds | int64))) (dict "name" "HUB_WORKER_PROBE_GRACE" "value" (printf "%ds" ($handover.graceSeconds | int64))) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $sidecar "env" (concat $primaryEnv $sidecar.env $probeEnv) -}}
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
{{- if eq $mode "in-place" -}}
{{- /* The wrapper stops the worker as kubelet would: SIGKILL after the pod's grace. */ -}}
{{- $grace := 30 -}}
{{- if hasKey $pod "terminationGracePeriodSeconds" }}{{ $grace = max 1 ($pod.terminationGracePeriodSeconds | int64) }}{{ end -}}
{{- $wrap = concat $wrap (list "--in-place" "--stop-grace" (printf "%ds" $grace)) -}}
{{- end -}}
{{- $_ := set $worker "command" (concat $wrap (list "--") $worker.command) -}}
{{- else if eq $mode "in-place" -}}
{{- fail "hubFollower.restart.mode: in-place needs execWrapper: true; the exec wrapper is what restarts the worker in place. Set execWrapper: true, or choose another restart.mode" -}}
{{- end -}}
{{- if eq $mode "liveness" -}}
{{- $probe := include "hub-follower.workerLivenessProbe" (dict "root" $root "handover" $handover) | fromYaml -}}
{{- $_ := set $worker "livenessProbe" $probe -}}
{{- /* A regular sidecar container may start well after the worker (a slow image pull):
until /worker/livez first answers, a startupProbe holds the liveness probe back, for as
long as the exec wrapper would wait for a decision. A worker's own startupProbe stays. */ -}}
{{- if and (not $c.native) (not $worker.startupProbe) -}}
{{- $period := $hf.restart.livenessPeriodSeconds | int64 -}}
{{- $wait := div (include "hub-follower.durationMs" (list "exec.wait" $hf.exec.wait) | int64) 1000 -}}
{{- $_ := set $worker "startupProbe" (dict "httpGet" $probe.httpGet "periodSeconds" $period "timeoutSeconds" $probe.timeoutSeconds "failureThreshold" (max 3 (div (add $wait $period -1) $period))) -}}
{{- end -}}
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

{{/* Lines for the parent's NOTES.txt. Takes the same dict as hub-follower.inject,
  {{ include "hub-follower.notes" (dict "root" . "manifests" (include "<your worker template>" .)) }}
and names the workload it patches in the commands it prints. Given only the root
context, it prints a placeholder for the workload instead. */}}
{{- define "hub-follower.notes" -}}
{{- $root := . -}}
{{- if and (kindIs "map" .) (hasKey . "root") }}{{ $root = .root }}{{ end -}}
{{- $hf := $root.Values.hubFollower -}}
{{- if include "hub-follower.enabled" $root -}}
{{- $native := include "hub-follower.native" $root -}}
{{- $workload := "<the worker's Deployment>" -}}
{{- $namespace := $root.Release.Namespace -}}
{{- if and (kindIs "map" .) (hasKey . "root") (hasKey . "manifests") -}}
{{- range include "hub-follower.documents" . | fromJsonArray -}}
{{- if include "hub-follower.isWorker" (dict "root" $root "obj" .) -}}
{{- $workload = printf "%s/%s" (lower (toString .kind)) (toString .metadata.name) -}}
{{- $namespace = dig "metadata" "namespace" $namespace . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $root -}}
hub-follower is on: restart mode {{ $hf.restart.mode }}, {{ if $native }}native sidecar{{ else }}regular sidecar container{{ end }} (Kubernetes {{ .Capabilities.KubeVersion.Version }}), exec wrapper {{ if $hf.execWrapper }}on{{ else }}off{{ end }}.
  Check:   kubectl -n {{ $namespace }} exec {{ $workload }} -c hub-follower -- /hub-follower check
  Status:  kubectl -n {{ $namespace }} port-forward {{ $workload }} {{ $hf.port | int64 }}
           then: curl localhost:{{ $hf.port | int64 }}/status
{{- if include "hub-follower.twoHubs" . }}
{{- if include "hub-follower.secondaryHub" . }}
  The Secret {{ $hf.secondary.secretName | quote }} must hold `token` and `ca.crt` for the secondary hub{{ with $hf.secondary.endpoint }} {{ . }}{{ end }}{{ if $hf.secondary.controllerSecret.token }} (rendered from secondary.controllerSecret){{ end }}.
{{- end }}
{{- range $hf.hubs }}
{{- if kindIs "map" . }}
  The Secret {{ .secretName | quote }} must hold `token` and `ca.crt` for the hub {{ .name }} {{ .endpoint }}.
{{- end }}
{{- end }}
  On {{ if $hf.hubs }}every hub{{ else }}both hubs{{ end }} the worker's hub identity needs {{ if $hf.watch.enabled }}get, list and watch{{ else }}get{{ end }} on
  clusters.controller.kubeslice.io/{{ with tpl (toString $hf.clusterName) . }}{{ . }}{{ else }}<the worker's CLUSTER_NAME>{{ end }} in the project namespace
  (docs/helm.md, "RBAC on both hubs").
{{- if include "hub-follower.overrides" . }}
  Pin or drain a hub for a while (docs/helm.md, "Pin and drain"), e.g.:
           kubectl -n {{ $namespace }} annotate pod <pod> {{ include "hub-follower.drainAnnotation" . }}="<hub> until <RFC 3339 time, at most 7 days ahead>"
{{- end }}
{{- else }}
  Single-hub mode (no secondary hub): the sidecar publishes the primary hub
  and follows no failover. No PrometheusRule is rendered.
{{- end }}
{{- if not $hf.execWrapper }}
  WARNING: execWrapper=false is only for a worker that reads the handoff files
  ({{ $hf.handoff.dir }}/active-hub.json) itself; today's worker-operator doesn't: it reads
  HUB_HOST_ENDPOINT from its env, so after a switch it reconnects to the old hub.
{{- if eq $hf.restart.mode "restart-all" }}
  In restart-all mode the kubelet restarts every container after a switch, the worker
  too, and it comes back on the old hub.
{{- end }}
{{- if not $native }}
  With a regular sidecar container too, nothing holds the worker back until the first
  decision is published: the worker must itself wait for {{ $hf.handoff.dir }}/active-hub.json.
{{- end }}
{{- end }}
{{- if eq $hf.restart.mode "none" }}
  restart.mode=none: after a switch the worker keeps its old hub until something else
  restarts it (kubeslice_worker_hub_worker_on_current_decision shows when).
{{- end }}
{{- if eq $hf.restart.mode "in-place" }}
  restart.mode=in-place: after a switch the exec wrapper restarts the worker inside its
  container; the container's restartCount does not change. Count the moves with
  kubeslice_worker_hub_worker_restarts_total{mode="in-place"} and the WorkerRestarted Events.
{{- end }}
{{- if eq $hf.restart.mode "restart-all" }}
  restart.mode=restart-all: after a switch the sidecar exits {{ $hf.restart.exitCode | int64 }} and the kubelet
  restarts every container of the pod in place. This relies on the alpha feature gate
  RestartAllContainersOnContainerExits (with NodeDeclaredFeatures) on kube-apiserver and
  on the worker's kubelet. A kube-apiserver without it refuses the Deployment; a kubelet
  without it treats the exit as an ordinary sidecar crash: only the sidecar restarts,
  and it then reports the worker `unverified` and does not exit again.
{{- end }}
{{- if and $hf.metrics.scrapeAnnotations (not $hf.metrics.podMonitor.enabled) }}
  Metrics: the sidecar's prometheus.io annotations are added only to a pod that has
  none; where the worker has its own, scrape port hub-follower with metrics.podMonitor.
{{- end }}
{{- end }}
{{- end -}}
{{- end -}}

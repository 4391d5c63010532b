{{/*
The named templates a parent chart includes in its worker Deployment. Each takes the
parent's root context (`.` at the top of the template, `$` inside a range/with), reads
.Values.hubFollower (the dependency's alias), and renders nothing while
hubFollower.enabled is false, so a guard in the parent is cheap belt and braces.
Wiring, with the nindent of each place:

  spec:
    template:
      metadata:
        annotations:
          {{- include "hub-follower.podAnnotations" . | nindent 8 }}
      spec:
        {{- include "hub-follower.podSpec" . | nindent 6 }}
        initContainers:
          {{- include "hub-follower.initContainers" . | nindent 8 }}
        containers:
          - name: manager
            command: {{- include "hub-follower.workerCommand" (dict "root" $ "command" (list "/manager")) | nindent 14 }}
            env:
              {{- include "hub-follower.workerEnv" . | nindent 14 }}
            volumeMounts:
              {{- include "hub-follower.workerVolumeMounts" . | nindent 14 }}
            livenessProbe: {{- include "hub-follower.workerLivenessProbe" (dict "root" $ "probe" $ownProbe) | nindent 14 }}
          {{- include "hub-follower.containers" . | nindent 10 }}
        volumes:
          {{- include "hub-follower.volumes" . | nindent 10 }}

docs/helm.md has the complete example; charts/hub-follower-example is the reference.
*/}}

{{/* Pod-level fields. Signal mode shares the process namespace so the sidecar can
find the worker process by name and signal it. No other mode needs it, and it is
left off there: a shared PID namespace also exposes each container's /proc. */}}
{{- define "hub-follower.podSpec" -}}
{{- if and (include "hub-follower.enabled" .) (eq .Values.hubFollower.restart.mode "signal") -}}
shareProcessNamespace: true
{{- end -}}
{{- end -}}

{{/* Pod annotations that let Prometheus scrape the sidecar's /metrics. */}}
{{- define "hub-follower.podAnnotations" -}}
{{- $hf := .Values.hubFollower -}}
{{- if and (include "hub-follower.enabled" .) $hf.metrics.scrapeAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ $hf.port | int64 | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}

{{/* initContainers items: the binary installer (execWrapper) and the native sidecar
(nativeSidecar). The installer comes first: it exits quickly, and the native sidecar
then holds the worker back until its startupProbe sees the first decision. */}}
{{- define "hub-follower.initContainers" -}}
{{- if include "hub-follower.enabled" . -}}
{{- $hf := .Values.hubFollower -}}
{{- $items := list -}}
{{- if $hf.execWrapper }}{{ $items = append $items (include "hub-follower.installer" .) }}{{ end -}}
{{- if $hf.nativeSidecar }}{{ $items = append $items (include "hub-follower.sidecar" .) }}{{ end -}}
{{- join "\n" $items -}}
{{- end -}}
{{- end -}}

{{/* containers items: the sidecar as a regular container when nativeSidecar is false
(clusters older than 1.29). The worker then waits for the first decision through the
exec wrapper's --wait. */}}
{{- define "hub-follower.containers" -}}
{{- if and (include "hub-follower.enabled" .) (not .Values.hubFollower.nativeSidecar) -}}
{{ include "hub-follower.sidecar" . }}
{{- end -}}
{{- end -}}

{{/* volumes items: the handoff directory (memory-backed: it holds a kubeconfig view
of the credentials), the secondary hub's credential (with two hubs), and the binary for the wrapper. */}}
{{- define "hub-follower.volumes" -}}
{{- $hf := .Values.hubFollower -}}
{{- if include "hub-follower.enabled" . -}}
- name: {{ include "hub-follower.handoffVolume" . }}
  emptyDir:
    medium: Memory
    sizeLimit: {{ $hf.handoff.sizeLimit }}
{{- if include "hub-follower.twoHubs" . }}
- name: {{ include "hub-follower.secondaryVolume" . }}
  secret:
    secretName: {{ $hf.secondary.secretName }}
    defaultMode: 0444
    # Listing the keys makes a Secret without them fail the pod visibly at mount time
    # instead of failing the credential exactly at failover.
    items:
      - key: token
        path: token
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- if $hf.execWrapper }}
- name: {{ include "hub-follower.binVolume" . }}
  emptyDir:
    sizeLimit: 64Mi
{{- end }}
{{- end -}}
{{- end -}}

{{/* The worker container's extra volumeMounts. The handoff dir is writable because
the exec wrapper writes worker-ack.json there. The secondary credential sits at the
sidecar's path because the handoff publishes paths, not contents. */}}
{{- define "hub-follower.workerVolumeMounts" -}}
{{- $hf := .Values.hubFollower -}}
{{- if include "hub-follower.enabled" . -}}
- name: {{ include "hub-follower.handoffVolume" . }}
  mountPath: {{ $hf.handoff.dir }}
{{- if include "hub-follower.twoHubs" . }}
- name: {{ include "hub-follower.secondaryVolume" . }}
  mountPath: {{ include "hub-follower.secondaryCredentialDir" . }}
  readOnly: true
{{- end }}
{{- if $hf.execWrapper }}
- name: {{ include "hub-follower.binVolume" . }}
  mountPath: {{ include "hub-follower.binDir" . }}
  readOnly: true
{{- end }}
{{- end -}}
{{- end -}}

{{/* The worker container's extra env. */}}
{{- define "hub-follower.workerEnv" -}}
{{- $hf := .Values.hubFollower -}}
{{- if include "hub-follower.enabled" . -}}
- name: HUB_HANDOFF_DIR
  value: {{ $hf.handoff.dir | quote }}
{{- end -}}
{{- end -}}

{{/*
The worker's command, as a YAML list. Takes (dict "root" $ "command" LIST).
With execWrapper it becomes `hub-follower exec --wait W -- COMMAND...`; the
container's `args` stay as they are and follow the command, as always. Otherwise, and
while hub-follower is disabled, the command is returned unchanged, so this include
needs no guard.
*/}}
{{- define "hub-follower.workerCommand" -}}
{{- $hf := .root.Values.hubFollower -}}
{{- $cmd := .command -}}
{{- if and (include "hub-follower.enabled" .root) $hf.execWrapper -}}
{{- $wrap := list (include "hub-follower.binPath" .root) "exec" "--wait" (toString $hf.exec.wait) -}}
{{- if $hf.exec.kubeconfig }}{{ $wrap = append $wrap "--kubeconfig" }}{{ end -}}
{{- $cmd = concat $wrap (list "--") .command -}}
{{- end -}}
{{- toYaml $cmd -}}
{{- end -}}

{{/*
The worker's livenessProbe. Takes (dict "root" $ "probe" MAP-or-nil).
In liveness mode it is an httpGet on the sidecar's /worker/livez, whose period and
threshold are derived from restart.livenessFailFor (see hub-follower.workerLivenessTiming).
That replaces the worker's own liveness check: the gate answers for the handoff, and
the worker's readinessProbe still reports its own health. In the other modes, and
while hub-follower is disabled, the worker's own probe is returned unchanged.
*/}}
{{- define "hub-follower.workerLivenessProbe" -}}
{{- $hf := .root.Values.hubFollower -}}
{{- if and (include "hub-follower.enabled" .root) (eq $hf.restart.mode "liveness") -}}
httpGet:
  path: /worker/livez
  port: {{ $hf.port | int64 }}
{{ include "hub-follower.workerLivenessTiming" .root }}
{{- else if .probe -}}
{{- toYaml .probe -}}
{{- end -}}
{{- end -}}

{{/* Lines for the parent's NOTES.txt. */}}
{{- define "hub-follower.notes" -}}
{{- $hf := .Values.hubFollower -}}
{{- if include "hub-follower.enabled" . -}}
hub-follower is on: restart mode {{ $hf.restart.mode }}, {{ if $hf.nativeSidecar }}native sidecar{{ else }}regular sidecar container{{ end }}, exec wrapper {{ if $hf.execWrapper }}on{{ else }}off{{ end }}.
  Status:  kubectl -n {{ .Release.Namespace }} port-forward deploy/<worker> {{ $hf.port | int64 }}
           then: curl localhost:{{ $hf.port | int64 }}/status
{{- if include "hub-follower.twoHubs" . }}
  The Secret {{ $hf.secondary.secretName | quote }} must hold `token` and `ca.crt` for {{ $hf.secondary.endpoint }}.
  On both hubs the worker's hub identity needs {{ if $hf.watch.enabled }}get, list and watch{{ else }}get{{ end }} on
  clusters.controller.kubeslice.io/{{ tpl (toString $hf.clusterName) . }} in the project namespace
  (docs/helm.md, "RBAC on both hubs").
{{- else }}
  Single-hub mode (secondary.endpoint is empty): the sidecar publishes the primary hub
  and follows no failover. No PrometheusRule is rendered.
{{- end }}
{{- if and (not $hf.nativeSidecar) (not $hf.execWrapper) }}
  WARNING: with nativeSidecar=false and execWrapper=false nothing holds the worker back
  until the first decision is published: the worker must itself wait for
  {{ $hf.handoff.dir }}/active-hub.json before it connects to a hub.
{{- end }}
{{- if eq $hf.restart.mode "none" }}
  restart.mode=none: after a switch the worker keeps its old hub until something else
  restarts it (kubeslice_worker_hub_worker_on_current_decision shows when).
{{- end }}
{{- end -}}
{{- end -}}

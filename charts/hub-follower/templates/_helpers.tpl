{{/*
Internal helpers of the hub-follower library chart. A parent chart includes only
"hub-follower.inject" (and, in its NOTES.txt, "hub-follower.notes"), both in _pod.tpl.
Helpers here take either the parent's root context or the inject context `$c`, a dict
built by hub-follower.inject:

  root              the parent's root context
  hf                .Values.hubFollower
  native            bool: the sidecar is a native (restartable init) container
  workerUID         int: the UID the worker container runs as
  primaryEndpoint   the primary endpoint as a literal, "" when it comes from a Secret

*/}}

{{/* Paths shared by the sidecar and the worker. The handoff publishes credential
paths, so each credential must be mounted at the same path in both containers; these
are also the binary's defaults. */}}
{{- define "hub-follower.primaryCredentialDir" -}}/var/run/secrets/kubernetes.io/hub-serviceaccount{{- end -}}
{{- define "hub-follower.secondaryCredentialDir" -}}/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount{{- end -}}
{{- /* A hub of hubFollower.hubs (takes its name): the binary's default directory for it. */ -}}
{{- define "hub-follower.hubCredentialDir" -}}/var/run/secrets/kubernetes.io/hub-{{ . }}-serviceaccount{{- end -}}
{{- define "hub-follower.binDir" -}}/opt/hub-follower{{- end -}}
{{- define "hub-follower.binPath" -}}{{ include "hub-follower.binDir" . }}/hub-follower{{- end -}}

{{- define "hub-follower.handoffVolume" -}}hub-follower-handoff{{- end -}}
{{- define "hub-follower.secondaryVolume" -}}hub-follower-secondary-hub{{- end -}}
{{- define "hub-follower.hubVolume" -}}hub-follower-hub-{{ . }}{{- end -}}
{{- define "hub-follower.binVolume" -}}hub-follower-bin{{- end -}}
{{- define "hub-follower.overridesVolume" -}}hub-follower-overrides{{- end -}}
{{- /* Where the sidecar reads the pin and drain annotations (HUB_OVERRIDE_DIR), and the
pod annotations that hold them (the binary's contract: files `pin` and `drain`, each the
annotation's value or empty). */ -}}
{{- define "hub-follower.overridesDir" -}}/etc/hub-follower/overrides{{- end -}}
{{- define "hub-follower.pinAnnotation" -}}hub-follower.kubeslice.io/pin{{- end -}}
{{- define "hub-follower.drainAnnotation" -}}hub-follower.kubeslice.io/drain{{- end -}}

{{/* "true" when hub-follower is on. Fails when it is on but the library's defaults are
missing, which means the dependency was declared without `alias: hubFollower`: the
defaults and the schema then land under another key. */}}
{{- define "hub-follower.enabled" -}}
{{- $hf := .Values.hubFollower -}}
{{- if and (kindIs "map" $hf) $hf.enabled -}}
{{- if not (and $hf.image $hf.restart $hf.metrics $hf.handoff) -}}
{{- fail "hubFollower: the hub-follower library's defaults are missing from .Values.hubFollower; declare the dependency with `alias: hubFollower` in Chart.yaml and run `helm dependency update`" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when a secondary hub is configured (secondary.*): HUB_SECONDARY_* and the
secondary credential volume. */}}
{{- define "hub-follower.secondaryHub" -}}
{{- $s := .Values.hubFollower.secondary -}}
{{- if or $s.endpoint $s.endpointFrom (dig "controllerSecret" "endpoint" "" $s) -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the sidecar follows more than one hub: a secondary hub, or any entry
of hubFollower.hubs (with or without a secondary). Without either the sidecar runs in
single-hub mode: it publishes the primary once and never polls nor watches. */}}
{{- define "hub-follower.twoHubs" -}}
{{- if or (include "hub-follower.secondaryHub" .) .Values.hubFollower.hubs -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the sidecar reads pin and drain overrides (takes the parent's root
context): overrides.enabled and more than one hub (the binary ignores them with one
hub). Then the pod gets the downward-API volume hub-follower-overrides, the sidecar
alone mounts it and gets HUB_OVERRIDE_DIR. */}}
{{- define "hub-follower.overrides" -}}
{{- if and (dig "overrides" "enabled" false .Values.hubFollower) (include "hub-follower.twoHubs" .) -}}
true
{{- end -}}
{{- end -}}

{{/* The sidecar's HUB_HUBS value (takes the parent's root context): one entry per
hubFollower.hubs item, joined by `;`, each
NAME=ENDPOINT,token-file=PATH,ca-file=PATH[,tls-server-name=NAME], with the paths
where hub-follower.volumes mounts the entry's Secret. Empty without hubs. */}}
{{- define "hub-follower.hubsEnv" -}}
{{- $entries := list -}}
{{- range $h := .Values.hubFollower.hubs | default list -}}
{{- $dir := include "hub-follower.hubCredentialDir" $h.name -}}
{{- $e := printf "%s=%s,token-file=%s/token,ca-file=%s/ca.crt" $h.name $h.endpoint $dir $dir -}}
{{- with $h.tlsServerName }}{{ $e = printf "%s,tls-server-name=%s" $e . }}{{ end -}}
{{- $entries = append $entries $e -}}
{{- end -}}
{{- join ";" $entries -}}
{{- end -}}

{{/* "true" when the sidecar is a native sidecar (an init container with
`restartPolicy: Always`, Kubernetes 1.29+). nativeSidecar unset (null) follows the
cluster's version; true below 1.29 fails, because the API server would drop the
field and run the sidecar as an init container that never ends.

restart.mode=restart-all is checked here, before anything else renders, because it
decides the flavour: its RestartAllContainers rule (KEP-5532) is a field of Kubernetes
1.35 and is allowed only on a native sidecar. Below 1.35 an API server would refuse
the rule (1.34 knows restartPolicyRules, but not on a sidecar and not this action) or
drop it; on a regular container it is refused as well. Either way the sidecar would
exit after a switch and be restarted alone, which looks like a crash loop and restarts
nothing else. */}}
{{- define "hub-follower.native" -}}
{{- $set := .Values.hubFollower.nativeSidecar -}}
{{- $kube := .Capabilities.KubeVersion.Version -}}
{{- $supported := semverCompare ">=1.29.0-0" $kube -}}
{{- if eq (toString .Values.hubFollower.restart.mode) "restart-all" -}}
{{- if not (semverCompare ">=1.35.0-0" $kube) -}}
{{- fail (printf "hubFollower.restart.mode: restart-all needs Kubernetes 1.35 or later with the RestartAllContainersOnContainerExits feature gate (alpha in 1.35; it needs NodeDeclaredFeatures too) on kube-apiserver and kubelet, and this render targets %s; choose signal or liveness" $kube) -}}
{{- end -}}
{{- if and (kindIs "bool" $set) (not $set) -}}
{{- fail "hubFollower.nativeSidecar: false does not go with hubFollower.restart.mode: restart-all; its RestartAllContainers rule is allowed only on a native sidecar (an init container with restartPolicy: Always). Leave nativeSidecar unset or set it to true, or choose another restart.mode" -}}
{{- end -}}
{{- end -}}
{{- if kindIs "invalid" $set -}}
{{- if $supported }}true{{ end -}}
{{- else if $set -}}
{{- if not $supported -}}
{{- fail (printf "hubFollower.nativeSidecar: true needs Kubernetes 1.29 or later (an init container with restartPolicy: Always), and this render targets %s. Leave nativeSidecar unset to get a regular sidecar container below 1.29, or set it to false" $kube) -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The image reference: repository[:tag][@digest]. */}}
{{- define "hub-follower.image" -}}
{{- $img := .Values.hubFollower.image -}}
{{- $ref := $img.repository -}}
{{- if $img.tag }}{{ $ref = printf "%s:%s" $ref $img.tag }}{{ end -}}
{{- if $img.digest }}{{ $ref = printf "%s@%s" $ref $img.digest }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{/*
A humantime duration in whole milliseconds. Takes (list "field.name" "1m30s").
Only number+unit pairs with the units ms, s, m and h are accepted: the subset that
both the binary (humantime) and this template agree on. The schema enforces the
same pattern; this check also covers `--skip-schema-validation`.
*/}}
{{- define "hub-follower.durationMs" -}}
{{- $field := index . 0 -}}
{{- $value := index . 1 | toString -}}
{{- if not (regexMatch "^([0-9]+(ms|s|m|h))+$" $value) -}}
{{- fail (printf "hubFollower.%s: %q is not a duration; use number+unit pairs with the units ms, s, m, h, e.g. 10s, 5m, 1m30s" $field $value) -}}
{{- end -}}
{{- $unit := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" $value -1 -}}
{{- $n := regexFind "^[0-9]+" . | int64 -}}
{{- $u := regexReplaceAll "^[0-9]+" . "" -}}
{{- $total = add $total (mul $n (get $unit $u)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* The sidecar's UID (takes $c): securityContext.runAsUser when set; otherwise the worker's UID
in signal mode (same-UID processes may signal each other without a capability) and
65532 (distroless "nonroot") in the other modes: liveness, none and restart-all act on
the worker through the kubelet, not through its processes. */}}
{{- define "hub-follower.sidecarUID" -}}
{{- $hf := .hf -}}
{{- $set := $hf.securityContext.runAsUser -}}
{{- if not (kindIs "invalid" $set) -}}
{{- $set | int64 -}}
{{- else if eq $hf.restart.mode "signal" -}}
{{- .workerUID | int64 -}}
{{- else -}}
65532
{{- end -}}
{{- end -}}

{{/* "true" when the sidecar needs CAP_KILL: only in signal mode, and only when it does
not share the worker's UID. Validation guarantees that UID is then 0, because
Kubernetes gives a non-root container no effective capabilities (no ambient
capabilities, and allowPrivilegeEscalation: false blocks file capabilities). */}}
{{- define "hub-follower.needsKill" -}}
{{- if and (eq .hf.restart.mode "signal") (ne (include "hub-follower.sidecarUID" . | int64) (.workerUID | int64)) -}}
true
{{- end -}}
{{- end -}}

{{/* Container securityContext. Takes (dict "root" $ "uid" N "kill" bool). */}}
{{- define "hub-follower.containerSecurityContext" -}}
{{- $hf := .root.Values.hubFollower -}}
runAsNonRoot: {{ ne (.uid | int64) 0 }}
runAsUser: {{ .uid | int64 }}
runAsGroup: {{ $hf.securityContext.runAsGroup | int64 }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
  {{- if .kill }}
  add: ["KILL"]
  {{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The worker's livenessProbe in liveness mode (takes (dict "root" $ "handover" MAP), the
map from hub-follower.workerProbeHandover): an httpGet on the sidecar's /worker/livez.

After a switch /worker/livez answers 503 for at most F = restart.livenessFailFor (less
if the restarted worker acknowledges earlier). The kubelet restarts the worker after
T = restart.livenessFailureThreshold consecutive failures, P =
restart.livenessPeriodSeconds apart. The first failing probe can come up to P after
the gate closes, and each probe may take up to timeoutSeconds, so the restart is
decided within T*P + timeoutSeconds of the gate closing. That must happen inside F, with
one period spare for probe scheduling jitter, or the gate reopens first:
T*P + timeoutSeconds + P <= F. The defaults (P=2s, T=3, timeout 2s) decide it within
8s; F=90s leaves ample room.

timeoutSeconds is the worker's own probe's plus one second for the hop through the
sidecar (1s when nothing is handed over); initialDelaySeconds is the worker's own.
*/}}
{{- define "hub-follower.workerLivenessProbe" -}}
{{- $hf := .root.Values.hubFollower -}}
{{- $h := .handover -}}
{{- $t := $hf.restart.livenessFailureThreshold | int64 -}}
{{- $p := $hf.restart.livenessPeriodSeconds | int64 -}}
{{- $timeout := 1 -}}
{{- if $h.target }}{{ $timeout = add ($h.timeoutSeconds | int64) 1 }}{{ end -}}
{{- $f := div (include "hub-follower.durationMs" (list "restart.livenessFailFor" $hf.restart.livenessFailFor) | int64) 1000 -}}
{{- $need := add (mul $t $p) $timeout $p -}}
{{- if lt $f $need -}}
{{- fail (printf "hubFollower.restart.livenessFailFor: %q is too short for restart.livenessFailureThreshold=%d and restart.livenessPeriodSeconds=%d; the worker's livenessProbe needs at least %ds to fail %d times inside it (threshold x period + timeout %ds + one period spare)" $hf.restart.livenessFailFor $t $p $need $t $timeout) -}}
{{- end -}}
httpGet:
  path: /worker/livez
  port: {{ $hf.port | int64 }}
{{- with $h.initialDelaySeconds }}
initialDelaySeconds: {{ . | int64 }}
{{- end }}
periodSeconds: {{ $p }}
failureThreshold: {{ $t }}
timeoutSeconds: {{ $timeout }}
successThreshold: 1
{{- with $h.terminationGracePeriodSeconds }}
terminationGracePeriodSeconds: {{ . | int64 }}
{{- end }}
{{- end -}}

{{/*
The worker's own livenessProbe, handed over to the sidecar in liveness mode (takes
(dict "worker" MAP)), as a map in YAML; empty when the worker has none.

  target     http://127.0.0.1:PORT/PATH (httpGet) or tcp://127.0.0.1:PORT (tcpSocket),
             a named port resolved from the worker's ports; httpGet.host when set
  timeoutSeconds, initialDelaySeconds, terminationGracePeriodSeconds: the worker's
  graceSeconds   (T0-1)*P0 - (T-1)*P, at least 0: the worker's own probe restarted it
             (T0-1)*P0 after its first failure (T0 = failureThreshold, default 3;
             P0 = periodSeconds, default 10); the sidecar reports it after the grace
             and kubelet needs T-1 periods more, so the total stays the same.

exec and grpc probes, HTTPS and httpHeaders cannot be run by the sidecar: refused.
*/}}
{{- define "hub-follower.workerProbeHandover" -}}
{{- $hf := .root.Values.hubFollower -}}
{{- $w := .worker -}}
{{- $own := $w.livenessProbe -}}
{{- if $own -}}
{{- $why := "restart.mode=liveness points the worker's livenessProbe at the sidecar's /worker/livez and hands the worker's own check to the sidecar, which runs httpGet (HTTP) and tcpSocket checks" -}}
{{- $action := "" -}}
{{- range $k := list "httpGet" "tcpSocket" "exec" "grpc" }}{{ if hasKey $own $k }}{{ $action = $k }}{{ end }}{{ end -}}
{{- if not (has $action (list "httpGet" "tcpSocket")) -}}
{{- fail (printf "hubFollower.restart.mode: the worker container %s has a livenessProbe of kind %s; %s. Use restart.mode=signal, or give the worker an httpGet or tcpSocket livenessProbe" (toString $w.name) ($action | default "(none)") $why) -}}
{{- end -}}
{{- $a := get $own $action -}}
{{- $port := $a.port -}}
{{- if kindIs "string" $port -}}
{{- $named := "" -}}
{{- range ($w.ports | default list) }}{{ if eq (toString .name) $port }}{{ $named = .containerPort }}{{ end }}{{ end -}}
{{- if not $named -}}
{{- fail (printf "hubFollower.restart.mode: the worker container %s's livenessProbe uses the port %q, which none of its ports is named; name one of its ports so, or give the probe a port number" (toString $w.name) $port) -}}
{{- end -}}
{{- $port = $named -}}
{{- end -}}
{{- $host := $a.host | default "127.0.0.1" -}}
{{- if contains ":" $host }}{{ $host = printf "[%s]" $host }}{{ end -}}
{{- $target := printf "tcp://%s:%d" $host ($port | int64) -}}
{{- if eq $action "httpGet" -}}
{{- if and $a.scheme (ne (upper (toString $a.scheme)) "HTTP") -}}
{{- fail (printf "hubFollower.restart.mode: the worker container %s's livenessProbe uses scheme %s; %s. Use restart.mode=signal" (toString $w.name) (toString $a.scheme) $why) -}}
{{- end -}}
{{- if $a.httpHeaders -}}
{{- fail (printf "hubFollower.restart.mode: the worker container %s's livenessProbe sets httpHeaders, which the sidecar does not send; %s. Use restart.mode=signal, or drop the headers" (toString $w.name) $why) -}}
{{- end -}}
{{- $path := toString ($a.path | default "/") -}}
{{- if not (hasPrefix "/" $path) }}{{ $path = printf "/%s" $path }}{{ end -}}
{{- $target = printf "http://%s:%d%s" $host ($port | int64) $path -}}
{{- end -}}
{{- $t0 := $own.failureThreshold | default 3 | int64 -}}
{{- $p0 := $own.periodSeconds | default 10 | int64 -}}
{{- $grace := sub (mul (sub $t0 1) $p0) (mul (sub ($hf.restart.livenessFailureThreshold | int64) 1) ($hf.restart.livenessPeriodSeconds | int64)) -}}
target: {{ $target | toJson }}
timeoutSeconds: {{ $own.timeoutSeconds | default 1 | int64 }}
graceSeconds: {{ max $grace 0 }}
{{- with $own.initialDelaySeconds }}
initialDelaySeconds: {{ . | int64 }}
{{- end }}
{{- with $own.terminationGracePeriodSeconds }}
terminationGracePeriodSeconds: {{ . | int64 }}
{{- end }}
{{- end -}}
{{- end -}}


{{/*
Checks that the schema cannot express (takes $c). Renders nothing; fails with a
message that names the field. The worker-derived settings (endpoint, cluster name,
project namespace) are checked where hub-follower.primaryEnv resolves them.
*/}}
{{- define "hub-follower.validate" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
{{- $secondaryLiteral := $hf.secondary.endpoint -}}
{{- if and .primaryEndpoint $secondaryLiteral (eq (trimSuffix "/" .primaryEndpoint) (trimSuffix "/" $secondaryLiteral)) -}}
{{- fail (printf "hubFollower.secondary.endpoint: %q is the same as the primary hub (the worker's HUB_HOST_ENDPOINT or hubFollower.primary.endpoint); it must be the other hub" $secondaryLiteral) -}}
{{- end -}}
{{- if and $hf.secondary.endpoint $hf.secondary.endpointFrom -}}
{{- fail "hubFollower.secondary.endpointFrom: set either hubFollower.secondary.endpoint or hubFollower.secondary.endpointFrom, not both" -}}
{{- end -}}
{{- $cs := $hf.secondary.controllerSecret | default dict -}}
{{- if or $cs.token (index $cs "ca.crt") $cs.endpoint -}}
{{- if not (and $cs.token (index $cs "ca.crt")) -}}
{{- fail "hubFollower.secondary.controllerSecret: `token` and `ca.crt` (both base64) are needed to render the secondary hub's Secret" -}}
{{- end -}}
{{- if not $hf.secondary.secretName -}}
{{- fail "hubFollower.secondary.secretName: name the Secret that hubFollower.secondary.controllerSecret renders" -}}
{{- end -}}
{{- end -}}
{{- if and (include "hub-follower.secondaryHub" $root) (not $hf.secondary.secretName) -}}
{{- fail "hubFollower.secondary.secretName: required with a secondary hub; the Secret holds `token` and `ca.crt` minted on that hub (or render it with hubFollower.secondary.controllerSecret)" -}}
{{- end -}}
{{- if and (not (include "hub-follower.secondaryHub" $root)) $hf.secondary.secretName -}}
{{- fail (printf "hubFollower.secondary.secretName: %q is set but hubFollower.secondary.endpoint is empty; set the endpoint of the secondary hub, or leave both empty for single-hub mode" $hf.secondary.secretName) -}}
{{- end -}}
{{- include "hub-follower.validateHubs" . -}}
{{- /* The binary refuses zero for these; jitter and cooldown may be 0s. */ -}}
{{- $positive := dict "pollInterval" $hf.pollInterval "probeTimeout" $hf.probeTimeout "confirmInterval" $hf.confirmInterval "restart.killAfter" $hf.restart.killAfter "restart.verifyTimeout" $hf.restart.verifyTimeout "restart.livenessFailFor" $hf.restart.livenessFailFor "exec.wait" $hf.exec.wait "watch.watchedPollInterval" $hf.watch.watchedPollInterval -}}
{{- range $name := keys $positive | sortAlpha -}}
{{- if eq (include "hub-follower.durationMs" (list $name (get $positive $name)) | int64) 0 -}}
{{- fail (printf "hubFollower.%s: must be longer than zero" $name) -}}
{{- end -}}
{{- end -}}
{{- range $name := list "jitter" "cooldown" -}}
{{- $_ := include "hub-follower.durationMs" (list (printf "restart.%s" $name) (index $hf.restart $name)) -}}
{{- end -}}
{{- /* splitBrainWindow and defaultAfter may be 0s (no limit; at once). */ -}}
{{- range $name := list "splitBrainWindow" "defaultAfter" -}}
{{- $_ := include "hub-follower.durationMs" (list $name (index $hf $name)) -}}
{{- end -}}
{{- $poll := include "hub-follower.durationMs" (list "pollInterval" $hf.pollInterval) | int64 -}}
{{- $probe := include "hub-follower.durationMs" (list "probeTimeout" $hf.probeTimeout) | int64 -}}
{{- if ge $probe $poll -}}
{{- fail (printf "hubFollower.probeTimeout: %q must be shorter than hubFollower.pollInterval (%q)" $hf.probeTimeout $hf.pollInterval) -}}
{{- end -}}
{{- /* The binary exits 2 on these (the watch timeout is checked even with the watch
off); here they fail before a pod crash-loops. */ -}}
{{- $confirm := include "hub-follower.durationMs" (list "confirmInterval" $hf.confirmInterval) | int64 -}}
{{- if gt $confirm $poll -}}
{{- fail (printf "hubFollower.confirmInterval: %q must not be longer than hubFollower.pollInterval (%q)" $hf.confirmInterval $hf.pollInterval) -}}
{{- end -}}
{{- range $name, $value := dict "watch.enabled" $hf.watch.enabled "events.enabled" $hf.events.enabled "overrides.enabled" (dig "overrides" "enabled" false $hf) -}}
{{- if not (kindIs "bool" $value) -}}
{{- fail (printf "hubFollower.%s: %v must be true or false" $name $value) -}}
{{- end -}}
{{- end -}}
{{- $watchTimeout := include "hub-follower.durationMs" (list "watch.timeout" $hf.watch.timeout) | int64 -}}
{{- if or (lt $watchTimeout 1000) (gt $watchTimeout 295000) -}}
{{- fail (printf "hubFollower.watch.timeout: %q must be between 1s and 295s (the API server's limit for a watch)" $hf.watch.timeout) -}}
{{- end -}}
{{- $watched := include "hub-follower.durationMs" (list "watch.watchedPollInterval" $hf.watch.watchedPollInterval) | int64 -}}
{{- if lt $watched $poll -}}
{{- fail (printf "hubFollower.watch.watchedPollInterval: %q must not be shorter than hubFollower.pollInterval (%q)" $hf.watch.watchedPollInterval $hf.pollInterval) -}}
{{- end -}}
{{- $deadHub := include "hub-follower.durationMs" (list "deadHubAfter" $hf.deadHubAfter) | int64 -}}
{{- if le $deadHub $poll -}}
{{- fail (printf "hubFollower.deadHubAfter: %q must be longer than hubFollower.pollInterval (%q): one missed read is no dead hub" $hf.deadHubAfter $hf.pollInterval) -}}
{{- end -}}
{{- range $p := $hf.workerPorts -}}
{{- if eq ($p | int64) ($hf.port | int64) -}}
{{- fail (printf "hubFollower.port: %d is already used by the worker (hubFollower.workerPorts); pick another port, e.g. 8095" ($hf.port | int64)) -}}
{{- end -}}
{{- end -}}
{{- /* The code the sidecar exits with in restart-all mode, matched by the sidecar's
RestartAllContainers rule. Checked in every mode, as the schema does (this also covers
--skip-schema-validation). It must not be a code the sidecar or its runtime exits with
for another reason, or that exit would restart the whole pod: 0 (a clean stop), 1 and
2 (the sidecar's own failures), 101 (a Rust panic), 126 and above (reserved by
shells, and 128+N for a death by signal N). */ -}}
{{- $code := $hf.restart.exitCode -}}
{{- if or (kindIs "string" $code) (not (regexMatch "^[0-9]+$" (toString $code))) (lt ($code | int64) 3) (gt ($code | int64) 125) (eq ($code | int64) 101) -}}
{{- fail (printf "hubFollower.restart.exitCode: %s must be a whole number from 3 to 125 other than 101 (0, 1 and 2 are the sidecar's own exits, 101 a Rust panic, 126 and above the shell's and deaths by a signal), e.g. 42" (toJson $code)) -}}
{{- end -}}
{{- $uid := include "hub-follower.sidecarUID" . | int64 -}}
{{- if eq $hf.restart.mode "signal" -}}
{{- if and (ne $uid (.workerUID | int64)) (ne $uid 0) -}}
{{- fail (printf "hubFollower.securityContext.runAsUser: %d differs from the worker's UID (%d: its runAsUser, or hubFollower.restart.workerUID when it sets none); a non-root sidecar can signal only processes of its own UID. Leave runAsUser empty to run as the worker's UID, or set it to 0 to run as root with only the KILL capability" $uid (.workerUID | int64)) -}}
{{- end -}}
{{- else if eq $uid 0 -}}
{{- fail (printf "hubFollower.securityContext.runAsUser: 0 (root) is allowed only with hubFollower.restart.mode=signal; in %s mode the sidecar needs no privilege" $hf.restart.mode) -}}
{{- end -}}
{{- end -}}

{{/*
Checks of hubFollower.hubs (takes $c), the hubs beyond the primary and the secondary.
The schema holds most of them too; these also cover `--skip-schema-validation`, and
what the schema cannot express: unique names, endpoints that differ from every other
hub's, and at most 8 hubs in all (the binary's MAX_HUBS) counting the secondary. Each
entry becomes part of HUB_HUBS, whose syntax gives `,` `;` and `=` a meaning, so no
value may carry them.
*/}}
{{- define "hub-follower.validateHubs" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
{{- $hubs := $hf.hubs | default list -}}
{{- if not (kindIs "slice" $hubs) -}}
{{- fail (printf "hubFollower.hubs: must be a list of {name, endpoint, secretName, tlsServerName}, got %s" (kindOf $hubs)) -}}
{{- end -}}
{{- $secondary := include "hub-follower.secondaryHub" $root -}}
{{- $total := add 1 (ternary 1 0 (eq $secondary "true")) (len $hubs) -}}
{{- if gt $total 8 -}}
{{- fail (printf "hubFollower.hubs: %d entries make %d hubs with the primary%s; at most 8 hubs in all, so at most %d entries %s" (len $hubs) $total (ternary " and the secondary" "" (eq $secondary "true")) (ternary 6 7 (eq $secondary "true")) (ternary "with a secondary hub" "without a secondary hub" (eq $secondary "true"))) -}}
{{- end -}}
{{- /* Endpoints seen so far, by the hub that has them: the primary and the secondary
when they are literals (a valueFrom cannot be compared here; the binary refuses a
duplicate at start-up). */ -}}
{{- $endpoints := dict -}}
{{- with .primaryEndpoint }}{{ $_ := set $endpoints (lower (trimSuffix "/" .)) "the primary hub (the worker's HUB_HOST_ENDPOINT or hubFollower.primary.endpoint)" }}{{ end -}}
{{- with $hf.secondary.endpoint }}{{ $_ := set $endpoints (lower (trimSuffix "/" .)) "hubFollower.secondary.endpoint" }}{{ end -}}
{{- $names := dict -}}
{{- range $i, $h := $hubs -}}
{{- $at := printf "hubFollower.hubs[%d]" $i -}}
{{- if not (kindIs "map" $h) -}}
{{- fail (printf "%s: must be a map with name, endpoint and secretName (and optionally tlsServerName), got %s" $at (kindOf $h)) -}}
{{- end -}}
{{- range $k := keys $h | sortAlpha -}}
{{- if not (has $k (list "name" "endpoint" "secretName" "tlsServerName")) -}}
{{- fail (printf "%s.%s: unknown key; an entry has name, endpoint, secretName and tlsServerName" $at $k) -}}
{{- end -}}
{{- end -}}
{{- $name := toString ($h.name | default "") -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$" $name) -}}
{{- fail (printf "%s.name: %q must be a DNS-1123 label of at most 32 characters (a-z, 0-9 and '-', starting and ending alphanumeric); it names the hub in HUB_HUBS, in the metrics and in its credential directory" $at $name) -}}
{{- end -}}
{{- if has $name (list "primary" "secondary") -}}
{{- fail (printf "%s.name: %q is the name of the hub set by hubFollower.%s; give this hub another name" $at $name $name) -}}
{{- end -}}
{{- if hasKey $names $name -}}
{{- fail (printf "%s.name: %q is already the name of %s; each hub needs a name of its own" $at $name (get $names $name)) -}}
{{- end -}}
{{- $_ := set $names $name $at -}}
{{- $endpoint := toString ($h.endpoint | default "") -}}
{{- if not (regexMatch "^https://[^\\s,;]+$" $endpoint) -}}
{{- fail (printf "%s.endpoint: %q must be the hub's https:// URL, e.g. https://10.1.80.13:6443 (no `,`, `;` or whitespace); an entry of hubFollower.hubs takes a literal endpoint only, no endpointFrom" $at $endpoint) -}}
{{- end -}}
{{- $key := lower (trimSuffix "/" $endpoint) -}}
{{- if hasKey $endpoints $key -}}
{{- fail (printf "%s.endpoint: %q is the same hub as %s; each hub must differ" $at $endpoint (get $endpoints $key)) -}}
{{- end -}}
{{- $_ := set $endpoints $key (printf "%s.endpoint" $at) -}}
{{- $secret := toString ($h.secretName | default "") -}}
{{- if not $secret -}}
{{- fail (printf "%s.secretName: required; name the Secret in the worker's namespace with `token` and `ca.crt` minted on the hub %q (%s)" $at $name $endpoint) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$" $secret) -}}
{{- fail (printf "%s.secretName: %q is not a Secret name (a DNS-1123 subdomain)" $at $secret) -}}
{{- end -}}
{{- with $h.tlsServerName -}}
{{- if not (regexMatch "^([^/:\\s,;=]+|[0-9a-fA-F:.]+)$" (toString .)) -}}
{{- fail (printf "%s.tlsServerName: %q must be a DNS name or an IP address (no `,`, `;`, `=` or whitespace)" $at (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The mounts of hubFollower.hubs' credentials as a YAML list (takes the parent's
root context), the same in the sidecar and the worker: the handoff publishes the
chosen hub's file paths, so the worker must find them where the sidecar reads them.
Empty without hubs. */}}
{{- define "hub-follower.hubMounts" -}}
{{- range $h := .Values.hubFollower.hubs | default list }}
- name: {{ include "hub-follower.hubVolume" $h.name }}
  mountPath: {{ include "hub-follower.hubCredentialDir" $h.name }}
  readOnly: true
{{- end }}
{{- end -}}

{{/*
The sidecar's primary-hub env entries as a YAML list (takes $c plus "workerEnv", the
worker container's env entries by name). Each one is, in order of preference: the
value given in hubFollower.*, the worker's own entry copied as it is (`value` or
`valueFrom`), or, for the credential files only, the binary's default path.
*/}}
{{- define "hub-follower.primaryEnv" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
{{- $w := .workerEnv -}}
{{- $worker := .workerName -}}
{{- $out := list -}}
{{- /* HUB_HOST_ENDPOINT */ -}}
{{- if $hf.primary.endpointFrom -}}
{{- $out = append $out (dict "name" "HUB_HOST_ENDPOINT" "valueFrom" $hf.primary.endpointFrom) -}}
{{- else if $hf.primary.endpoint -}}
{{- $v := tpl (toString $hf.primary.endpoint) $root -}}
{{- if not (regexMatch "^https://[^\\s]+$" $v) -}}
{{- fail (printf "hubFollower.primary.endpoint: %q must be the worker's hub URL (https://...); leave it empty to use the worker's own HUB_HOST_ENDPOINT" $v) -}}
{{- end -}}
{{- $out = append $out (dict "name" "HUB_HOST_ENDPOINT" "value" $v) -}}
{{- else if hasKey $w "HUB_HOST_ENDPOINT" -}}
{{- $e := get $w "HUB_HOST_ENDPOINT" -}}
{{- if and (hasKey $e "value") (not (regexMatch "^https://[^\\s]+$" (toString $e.value))) -}}
{{- fail (printf "hubFollower.primary.endpoint: the worker container %s has HUB_HOST_ENDPOINT=%q, not an https:// URL; set hubFollower.primary.endpoint or hubFollower.primary.endpointFrom" $worker (toString $e.value)) -}}
{{- end -}}
{{- $out = append $out (deepCopy $e) -}}
{{- else -}}
{{- fail (printf "hubFollower.primary.endpoint: the worker container %s has no HUB_HOST_ENDPOINT env entry to copy; set hubFollower.primary.endpoint (https://...) or hubFollower.primary.endpointFrom" $worker) -}}
{{- end -}}
{{- /* HUB_PROJECT_NAMESPACE */ -}}
{{- if $hf.projectNamespaceFrom -}}
{{- $out = append $out (dict "name" "HUB_PROJECT_NAMESPACE" "valueFrom" $hf.projectNamespaceFrom) -}}
{{- else -}}
{{- $e := dict -}}
{{- $field := "hubFollower.projectNamespace" -}}
{{- if $hf.projectNamespace -}}
{{- $e = dict "name" "HUB_PROJECT_NAMESPACE" "value" (tpl (toString $hf.projectNamespace) $root) -}}
{{- else if hasKey $w "HUB_PROJECT_NAMESPACE" -}}
{{- $e = deepCopy (get $w "HUB_PROJECT_NAMESPACE") -}}
{{- else -}}
{{- fail (printf "hubFollower.projectNamespace: the worker container %s has no HUB_PROJECT_NAMESPACE env entry to copy; set hubFollower.projectNamespace or hubFollower.projectNamespaceFrom" $worker) -}}
{{- end -}}
{{- if and (hasKey $e "value") (not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" (toString $e.value))) -}}
{{- fail (printf "%s: %q must be the worker's HUB_PROJECT_NAMESPACE, a DNS-1123 label, or set hubFollower.projectNamespaceFrom" $field (toString $e.value)) -}}
{{- end -}}
{{- $out = append $out $e -}}
{{- end -}}
{{- /* CLUSTER_NAME */ -}}
{{- $e := dict -}}
{{- if $hf.clusterName -}}
{{- $e = dict "name" "CLUSTER_NAME" "value" (tpl (toString $hf.clusterName) $root) -}}
{{- else if hasKey $w "CLUSTER_NAME" -}}
{{- $e = deepCopy (get $w "CLUSTER_NAME") -}}
{{- else -}}
{{- fail (printf "hubFollower.clusterName: the worker container %s has no CLUSTER_NAME env entry to copy; set hubFollower.clusterName" $worker) -}}
{{- end -}}
{{- if and (hasKey $e "value") (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" (toString $e.value))) -}}
{{- fail (printf "hubFollower.clusterName: %q must be the worker's CLUSTER_NAME, a DNS-1123 subdomain" (toString $e.value)) -}}
{{- end -}}
{{- $out = append $out $e -}}
{{- /* HUB_TOKEN_FILE, HUB_CA_FILE: the paths the sidecar reads and publishes. */ -}}
{{- $dir := include "hub-follower.primaryCredentialDir" $root -}}
{{- range $spec := list (list "HUB_TOKEN_FILE" "tokenFile" "token") (list "HUB_CA_FILE" "caFile" "ca.crt") -}}
{{- $var := index $spec 0 -}}
{{- $spec = rest $spec -}}
{{- $set := index $hf.primary (index $spec 0) -}}
{{- if $set -}}
{{- $out = append $out (dict "name" $var "value" $set) -}}
{{- else if hasKey $w $var -}}
{{- $e := get $w $var -}}
{{- if not (hasKey $e "value") -}}
{{- fail (printf "hubFollower.primary.%s: the worker's %s is not a literal path, so the chart cannot tell where to mount its volume in the sidecar; set hubFollower.primary.%s" (index $spec 0) $var (index $spec 0)) -}}
{{- end -}}
{{- $out = append $out (deepCopy $e) -}}
{{- else -}}
{{- $out = append $out (dict "name" $var "value" (printf "%s/%s" $dir (index $spec 1))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The sidecar's environment, except the primary-hub entries (hub-follower.primaryEnv).
Takes $c. */}}
{{- define "hub-follower.sidecarEnv" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
{{- $secondaryDir := include "hub-follower.secondaryCredentialDir" $root -}}
{{- with $hf.primary.tlsServerName }}
- name: HUB_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if include "hub-follower.secondaryHub" $root }}
- name: HUB_SECONDARY_HOST_ENDPOINT
{{- if $hf.secondary.endpoint }}
  value: {{ $hf.secondary.endpoint | quote }}
{{- else if $hf.secondary.endpointFrom }}
  valueFrom:
    {{- toYaml $hf.secondary.endpointFrom | nindent 4 }}
{{- else }}
  valueFrom:
    secretKeyRef:
      name: {{ $hf.secondary.secretName }}
      key: endpoint
{{- end }}
- name: HUB_SECONDARY_TOKEN_FILE
  value: {{ printf "%s/token" $secondaryDir | quote }}
- name: HUB_SECONDARY_CA_FILE
  value: {{ printf "%s/ca.crt" $secondaryDir | quote }}
{{- with $hf.secondary.tlsServerName }}
- name: HUB_SECONDARY_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- with include "hub-follower.hubsEnv" $root }}
- name: HUB_HUBS
  value: {{ . | quote }}
{{- end }}
- name: HUB_POLL_INTERVAL
  value: {{ $hf.pollInterval | quote }}
- name: HUB_PROBE_TIMEOUT
  value: {{ $hf.probeTimeout | quote }}
- name: HUB_SWITCH_CONFIRMATIONS
  value: {{ $hf.confirmations | int64 | quote }}
- name: HUB_CONFIRM_INTERVAL
  value: {{ $hf.confirmInterval | quote }}
- name: HUB_DEAD_HUB_AFTER
  value: {{ $hf.deadHubAfter | quote }}
- name: HUB_SPLIT_BRAIN_WINDOW
  value: {{ $hf.splitBrainWindow | quote }}
- name: HUB_DEFAULT_AFTER
  value: {{ $hf.defaultAfter | quote }}
- name: HUB_WATCH
  value: {{ ternary "true" "false" $hf.watch.enabled | quote }}
- name: HUB_WATCH_TIMEOUT
  value: {{ $hf.watch.timeout | quote }}
- name: HUB_WATCHED_POLL_INTERVAL
  value: {{ $hf.watch.watchedPollInterval | quote }}
- name: HUB_HANDOFF_DIR
  value: {{ $hf.handoff.dir | quote }}
{{- if include "hub-follower.overrides" $root }}
- name: HUB_OVERRIDE_DIR
  value: {{ include "hub-follower.overridesDir" $root | quote }}
{{- end }}
- name: HUB_FOLLOWER_LISTEN
  value: {{ printf "0.0.0.0:%d" ($hf.port | int64) | quote }}
- name: HUB_FOLLOWER_LOG_FORMAT
  value: {{ $hf.logFormat | quote }}
- name: RUST_LOG
  value: {{ $hf.logLevel | quote }}
- name: HUB_RESTART_MODE
  value: {{ $hf.restart.mode | quote }}
{{- if eq $hf.restart.mode "restart-all" }}
- name: HUB_RESTART_EXIT_CODE
  value: {{ $hf.restart.exitCode | int64 | quote }}
{{- end }}
{{- if eq $hf.restart.mode "signal" }}
- name: HUB_WORKER_PROCESS
  value: {{ $hf.restart.workerProcess | quote }}
- name: HUB_RESTART_SIGNAL
  value: {{ $hf.restart.signal | quote }}
- name: HUB_KILL_AFTER
  value: {{ $hf.restart.killAfter | quote }}
{{- end }}
{{- /* Every mode reads it: in signal mode it bounds verification after not_found and
permission_denied. */}}
- name: HUB_LIVENESS_FAIL_FOR
  value: {{ $hf.restart.livenessFailFor | quote }}
- name: HUB_RESTART_VERIFY_TIMEOUT
  value: {{ $hf.restart.verifyTimeout | quote }}
- name: HUB_RESTART_JITTER
  value: {{ $hf.restart.jitter | quote }}
- name: HUB_RESTART_COOLDOWN
  value: {{ $hf.restart.cooldown | quote }}
- name: HUB_EVENTS
  value: {{ ternary "true" "false" $hf.events.enabled | quote }}
{{- if $hf.events.enabled }}
{{- /* The pod the Events are about, the namespace they are recorded in, and the
pod's UID, by which `kubectl describe pod` finds them. */}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
{{- end }}
{{- with $hf.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The sidecar container as a map in YAML (takes $c). hub-follower.inject adds the
primary-hub env entries and the primary credential mounts as data. */}}
{{- define "hub-follower.sidecar" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
name: hub-follower
image: {{ include "hub-follower.image" $root | quote }}
imagePullPolicy: {{ $hf.image.pullPolicy }}
{{- if .native }}
restartPolicy: Always
{{- /* restart-all: the sidecar exits with restart.exitCode after a confirmed switch,
and this rule has the kubelet restart every container of the pod in place (sandbox, IP
and emptyDirs kept; init containers run again). Any other exit restarts the sidecar
alone, as restartPolicy: Always does. hub-follower.native made sure the sidecar is
native here. */}}
{{- if eq $hf.restart.mode "restart-all" }}
restartPolicyRules:
  - action: RestartAllContainers
    exitCodes:
      operator: In
      values: [{{ $hf.restart.exitCode | int64 }}]
{{- end }}
{{- end }}
env:
  {{- include "hub-follower.sidecarEnv" . | nindent 2 }}
ports:
  - name: hub-follower
    containerPort: {{ $hf.port | int64 }}
    protocol: TCP
{{- if .native }}
startupProbe:
  httpGet:
    path: /readyz
    port: hub-follower
  periodSeconds: {{ $hf.startupProbe.periodSeconds | int64 }}
  failureThreshold: {{ $hf.startupProbe.failureThreshold | int64 }}
  timeoutSeconds: 1
{{- end }}
livenessProbe:
  httpGet:
    path: /healthz
    port: hub-follower
  periodSeconds: 10
  failureThreshold: 3
  timeoutSeconds: 2
readinessProbe:
  httpGet:
    path: /readyz
    port: hub-follower
  periodSeconds: 5
  failureThreshold: 2
  timeoutSeconds: 2
resources:
  {{- toYaml $hf.resources | nindent 2 }}
securityContext:
  {{- include "hub-follower.containerSecurityContext" (dict "root" $root "uid" (include "hub-follower.sidecarUID" . | int64) "kill" (eq (include "hub-follower.needsKill" .) "true")) | nindent 2 }}
volumeMounts:
  - name: {{ include "hub-follower.handoffVolume" $root }}
    mountPath: {{ $hf.handoff.dir }}
  {{- if include "hub-follower.secondaryHub" $root }}
  - name: {{ include "hub-follower.secondaryVolume" $root }}
    mountPath: {{ include "hub-follower.secondaryCredentialDir" $root }}
    readOnly: true
  {{- end }}
  {{- with include "hub-follower.hubMounts" $root | trim }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- /* The pin and drain annotations: the sidecar's alone, the worker has no use for them. */}}
  {{- if include "hub-follower.overrides" $root }}
  - name: {{ include "hub-follower.overridesVolume" $root }}
    mountPath: {{ include "hub-follower.overridesDir" $root }}
    readOnly: true
  {{- end }}
{{- end -}}

{{/* The init container that copies the binary for the exec wrapper, as a map in YAML
(takes $c). It never runs as root. */}}
{{- define "hub-follower.installer" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
{{- $uid := include "hub-follower.sidecarUID" . | int64 -}}
{{- if eq $uid 0 }}{{ $uid = 65532 }}{{ end -}}
name: hub-follower-install
image: {{ include "hub-follower.image" $root | quote }}
imagePullPolicy: {{ $hf.image.pullPolicy }}
args: ["install", {{ include "hub-follower.binPath" $root | quote }}]
resources:
  {{- toYaml $hf.resources | nindent 2 }}
securityContext:
  {{- include "hub-follower.containerSecurityContext" (dict "root" $root "uid" $uid "kill" false) | nindent 2 }}
volumeMounts:
  - name: {{ include "hub-follower.binVolume" $root }}
    mountPath: {{ include "hub-follower.binDir" $root }}
{{- end -}}

{{/* The worker's volumes as a YAML list (takes $c): the handoff directory
(memory-backed: it holds a kubeconfig view of the credentials), the secondary hub's
credential (with a secondary hub), each hubFollower.hubs entry's credential, the pin
and drain annotations (hub-follower.overrides), and the binary for the wrapper. */}}
{{- define "hub-follower.volumes" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
- name: {{ include "hub-follower.handoffVolume" $root }}
  emptyDir:
    medium: Memory
    sizeLimit: {{ $hf.handoff.sizeLimit }}
{{- if include "hub-follower.secondaryHub" $root }}
- name: {{ include "hub-follower.secondaryVolume" $root }}
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
{{- range $h := $hf.hubs | default list }}
- name: {{ include "hub-follower.hubVolume" $h.name }}
  secret:
    secretName: {{ $h.secretName }}
    defaultMode: 0444
    items:
      - key: token
        path: token
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- /* kubelet rewrites these files when the annotations change (on its pod sync, about
a minute); an annotation that is not set gives an empty file, which means none. */}}
{{- if include "hub-follower.overrides" $root }}
- name: {{ include "hub-follower.overridesVolume" $root }}
  downwardAPI:
    defaultMode: 0444
    items:
      - path: pin
        fieldRef:
          fieldPath: {{ printf "metadata.annotations['%s']" (include "hub-follower.pinAnnotation" $root) | quote }}
      - path: drain
        fieldRef:
          fieldPath: {{ printf "metadata.annotations['%s']" (include "hub-follower.drainAnnotation" $root) | quote }}
{{- end }}
{{- if $hf.execWrapper }}
- name: {{ include "hub-follower.binVolume" $root }}
  emptyDir:
    sizeLimit: 64Mi
{{- end }}
{{- end -}}

{{/* The worker container's extra volumeMounts as a YAML list (takes $c). The handoff
dir is writable because the exec wrapper writes worker-ack.json there. The secondary
credential and those of hubFollower.hubs sit at the sidecar's paths because the
handoff publishes paths. */}}
{{- define "hub-follower.workerVolumeMounts" -}}
{{- $hf := .hf -}}
{{- $root := .root -}}
- name: {{ include "hub-follower.handoffVolume" $root }}
  mountPath: {{ $hf.handoff.dir }}
{{- if include "hub-follower.secondaryHub" $root }}
- name: {{ include "hub-follower.secondaryVolume" $root }}
  mountPath: {{ include "hub-follower.secondaryCredentialDir" $root }}
  readOnly: true
{{- end }}
{{- with include "hub-follower.hubMounts" $root | trim }}
{{ . }}
{{- end }}
{{- if $hf.execWrapper }}
- name: {{ include "hub-follower.binVolume" $root }}
  mountPath: {{ include "hub-follower.binDir" $root }}
  readOnly: true
{{- end }}
{{- end -}}



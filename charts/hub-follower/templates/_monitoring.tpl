{{/*
A monitoring.coreos.com/v1 PrometheusRule with the hub-follower alerts, as a complete
document, when hubFollower.enabled and hubFollower.metrics.prometheusRule.enabled.
The parent puts `{{ include "hub-follower.prometheusRule" . }}` in a template file of
its own. Each alert links to <runbookBaseURL>#<alert name in lower case>; the
runbooks are in docs/runbooks.md.

The expressions aggregate `without` the hub-follower labels instead of `by` target
labels, so they work whatever labels the scrape configuration attaches.

Nothing is rendered in single-hub mode (no secondary hub and no hubFollower.hubs): the
sidecar then never probes, so the probe-success timestamps stay 0 and
HubFollowerNoUsableHub would fire falsely, and with nothing to switch to the other
alerts cannot fire. HubFollowerSecondaryHubUnreachable, named so for its runbook
links, is about every hub the worker is not on: the hubs whose
kubeslice_worker_hub_active is not 1, whatever their names, one alert per hub (its
`hub` label). A standby's credential is used only at failover, so a broken one would
fail exactly then; after a failover to the secondary an unreachable primary is such a
standby, and fires. The hub the worker is on is not this alert's. It is silent for a
hub while a drain of it is in effect (the hub-follower.kubeslice.io/drain annotation;
kubeslice_worker_hub_override_until_timestamp_seconds{kind="drain"} > 0): the worker
does not fail over to a drained hub, and an operator who drains a hub expects it to be
down. It fires again `for` after the drain ends if the hub still fails.
HubFollowerOverrideRefused is rendered only with the overrides volume
(hub-follower.overrides): without it the sidecar reads no pin or drain.
HubFollowerActiveHubUnreachable is the other side of HubFollowerSecondaryHubUnreachable:
the hub the worker is on (kubeslice_worker_hub_active == 1), matched to its probe series
on every label (`hub` and the target labels). HubFollowerSwitchHeld leaves out the
holds that are not a fault: older_than_basis is the steady state after a failover while
the old hub keeps its stale claim (a dead hub under the worker is
HubFollowerActiveHubUnreachable's), and split_brain is HubFollowerSplitBrain's.
HubFollowerActiveHubNotClaiming is the hub the worker is on answering, its watch up, with
no claim for itself after its controller was seen republishing: its controller stopped.
HubFollowerBasisUnconfirmed is the hold rule 10 cannot end: a switch held as
older_than_basis while the hub the worker is on answers without a claim for itself, its
controller never seen republishing or its watch not vouching. Nothing proves that hub's
controller dead, so the worker stays; the alert says so instead of a silent hold.
HubFollowerNoClaimSeen is no hub showing any claim for ten minutes: nothing publishes in
HA mode, or the hubs' Cluster CRD drops status.activeController; the worker follows no
failover, and nothing else would say so.
*/}}
{{- define "hub-follower.prometheusRule" -}}
{{- $hf := .Values.hubFollower -}}
{{- if and (include "hub-follower.enabled" .) $hf.metrics.prometheusRule.enabled (include "hub-follower.twoHubs" .) -}}
{{- $rule := $hf.metrics.prometheusRule -}}
{{- $poll := div (include "hub-follower.durationMs" (list "pollInterval" $hf.pollInterval) | int64) 1000 -}}
{{- /* "Recently": three polls, at least a minute, so one lost probe does not count. */ -}}
{{- $stale := max 60 (mul 3 $poll) -}}
{{- /* Rate windows must hold several scrapes and several probes. */ -}}
{{- $window := max 120 (mul 6 $poll) -}}
{{- $base := trimSuffix "/" $rule.runbookBaseURL -}}
{{- $deadHub := div (include "hub-follower.durationMs" (list "deadHubAfter" $hf.deadHubAfter) | int64) 1000 -}}
{{- $_ := include "hub-follower.durationMs" (list "metrics.prometheusRule.flappingWindow" $rule.flappingWindow) -}}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ printf "%s-hub-follower" .Release.Name | trunc 63 | trimSuffix "-" }}
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: hub-follower
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/managed-by: {{ .Release.Service }}
    {{- with $rule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  groups:
    - name: hub-follower
      rules:
        # A standby hub's credential (any hub the worker is not on) is used only at
        # failover, so a broken one would fail exactly then. Fires, per hub the worker
        # is not on (kubeslice_worker_hub_active not 1), after
        # for.secondaryHubUnreachable without one successful probe of that hub,
        # including "never succeeded since start"; not for the hub the worker is on
        # (plain `unless`: the active gauge has `hub` and the same target labels as the
        # probe series), and not while the hub is drained (`unless ignoring(kind)`: the
        # drain gauge has `kind`, the probe series do not).
        - alert: HubFollowerSecondaryHubUnreachable
          expr: |
            sum without (reason) (rate(kubeslice_worker_hub_probe_errors_total[{{ $window }}s])) > 0
            unless
            (time() - kubeslice_worker_hub_last_probe_success_timestamp_seconds) < {{ $stale }}
            unless
            (kubeslice_worker_hub_active == 1)
            unless ignoring(kind)
            (kubeslice_worker_hub_override_until_timestamp_seconds{kind="drain"} > 0)
          for: {{ $rule.for.secondaryHubUnreachable }}
          labels:
            severity: warning
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: {{ `hub-follower cannot probe the {{ $labels.hub }} hub.` | quote }}
            description: {{ printf "The {{ $labels.hub }} hub has failed every probe of {{ $labels.namespace }}/{{ $labels.pod }} for %s. Its credential or endpoint would fail at failover." $rule.for.secondaryHubUnreachable | quote }}
            runbook_url: {{ printf "%s#hubfollowersecondaryhubunreachable" $base }}
        # Neither hub has answered a probe recently, or no decision is published: the
        # worker cannot follow a failover, and a restarting worker waits.
        - alert: HubFollowerNoUsableHub
          expr: |
            (sum without (hub) (kubeslice_worker_hub_active) == 0)
            or
            (min without (hub) (time() - kubeslice_worker_hub_last_probe_success_timestamp_seconds) > {{ $stale }})
          for: {{ $rule.for.noUsableHub }}
          labels:
            severity: critical
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower has no usable hub.
            description: {{ `hub-follower in {{ $labels.namespace }}/{{ $labels.pod }} has no Active hub it can reach.` | quote }}
            runbook_url: {{ printf "%s#hubfollowernousablehub" $base }}
        # The hub the worker is on (kubeslice_worker_hub_active == 1) has had no
        # successful probe for more than {{ $stale }}s, including "never succeeded"
        # (timestamp 0). Plain `and`: both series have `hub` and the same target labels,
        # so one worker being on a hub does not make another worker's alert. At the
        # defaults (60s stale, for.activeHubUnreachable 1m) it fires 2m after the last
        # successful probe plus up to one evaluation interval (30s, the Prometheus
        # Operator's default): 2m30s at the latest, before the sidecar's deadHubAfter
        # (3m by default, counted from the last answer) lets a claim of another hub
        # by itself move the worker although it is not fresher than the current
        # decision's. So the dead hub is alerted on before that move.
        - alert: HubFollowerActiveHubUnreachable
          expr: |
            (time() - kubeslice_worker_hub_last_probe_success_timestamp_seconds) > {{ $stale }}
            and
            (kubeslice_worker_hub_active == 1)
          for: {{ $rule.for.activeHubUnreachable }}
          labels:
            severity: critical
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: {{ `hub-follower cannot reach the {{ $labels.hub }} hub, the one the worker is on.` | quote }}
            description: {{ printf "No probe by {{ $labels.namespace }}/{{ $labels.pod }} of the {{ $labels.hub }} hub, the one its worker is on, has succeeded in the last %ds, and that has held for %s. Once that hub has answered no read for deadHubAfter (%s), a claim of another hub by itself moves the worker even if it is not fresher than the current decision's." ($stale | int64) $rule.for.activeHubUnreachable $hf.deadHubAfter | quote }}
            runbook_url: {{ printf "%s#hubfolloweractivehubunreachable" $base }}
        # The hub the worker is on answers, its watch up, but has shown no claim for itself
        # (read or watched) for more than 60s, after its controller was seen republishing
        # (KubeSlice's own rewrites its erased claim every 30s): its controller has stopped.
        # The gauge is the claim clock's start, 0 while it does not run. At the defaults
        # (for.activeHubNotClaiming 1m) it fires 2m after the last claim plus up to one
        # evaluation interval, before deadHubAfter (3m) lets a claim another hub makes for
        # itself move the worker although it is not fresher than the current decision's.
        - alert: HubFollowerActiveHubNotClaiming
          expr: |
            (time() - kubeslice_worker_hub_active_hub_unclaimed_since_timestamp_seconds) > 60
            and
            (kubeslice_worker_hub_active_hub_unclaimed_since_timestamp_seconds > 0)
          for: {{ $rule.for.activeHubNotClaiming }}
          labels:
            severity: critical
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower sees no claim from the controller of the hub the worker is on.
            description: {{ printf "The hub that {{ $labels.namespace }}/{{ $labels.pod }}'s worker is on answers, and its watch is up, but it has shown no claim for itself for more than 60s, and that has held for %s, although its controller rewrote its claim before; the controller has stopped publishing. After deadHubAfter (%s) without one, a claim another hub makes for itself moves the worker even if it is not fresher than the current decision's." $rule.for.activeHubNotClaiming $hf.deadHubAfter | quote }}
            runbook_url: {{ printf "%s#hubfolloweractivehubnotclaiming" $base }}
        # A switch to another hub held as older_than_basis, while the hub the worker is on
        # answers without a claim for itself and rule 10 cannot end the hold: that hub's
        # controller was never seen republishing, or its watch does not vouch. The gauge is
        # since when it answered without one, 0 for any other hold. Older than deadHubAfter,
        # and that for for.basisUnconfirmed: where rule 10 would have moved the worker.
        - alert: HubFollowerBasisUnconfirmed
          expr: |
            (time() - kubeslice_worker_hub_basis_unconfirmed_since_timestamp_seconds) > {{ $deadHub }}
            and
            (kubeslice_worker_hub_basis_unconfirmed_since_timestamp_seconds > 0)
          for: {{ $rule.for.basisUnconfirmed }}
          labels:
            severity: critical
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower holds the worker on a hub that no longer claims to be Active, and cannot prove it dead.
            description: {{ printf "Another hub claims to be Active, but its claim is dated before the one {{ $labels.namespace }}/{{ $labels.pod }}'s worker follows, and the hub the worker is on has answered without a claim for itself for more than deadHubAfter (%s), for %s. Its controller was never seen republishing, or its watch is down, so the sidecar cannot tell a dead controller (a clock ahead, or an epoch counter that restarted) from one that wrote once. The worker stays; if that controller is dead, move the worker as the runbook says." $hf.deadHubAfter $rule.for.basisUnconfirmed | quote }}
            runbook_url: {{ printf "%s#hubfollowerbasisunconfirmed" $base }}
        # No hub has shown a claim, read or watched, for more than 600s: no controller
        # publishes in HA mode, or a hub's Cluster CRD does not declare
        # status.activeController and its API server drops the field (KubeSlice's own
        # controller rewrites its erased claim every 30s). The gauge is the last claim's
        # time, or the sidecar's first round while none has come; 0 with one hub. The
        # sidecar records a HubNoClaim Warning Event at 600s.
        - alert: HubFollowerNoClaimSeen
          expr: |
            (time() - kubeslice_worker_hub_claim_seen_timestamp_seconds) > 600
            and
            (kubeslice_worker_hub_claim_seen_timestamp_seconds > 0)
          for: {{ $rule.for.noClaimSeen }}
          labels:
            severity: critical
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower has seen no claim from any hub, so the worker follows no failover.
            description: {{ printf "No hub has shown {{ $labels.namespace }}/{{ $labels.pod }}'s sidecar a claim (status.activeController, read or watched) for more than 600s, and that has held for %s. No controller publishes in HA mode, or a hub's Cluster CRD does not declare status.activeController and its API server drops the field. The worker stays where it is and follows no failover." $rule.for.noClaimSeen | quote }}
            runbook_url: {{ printf "%s#hubfollowernoclaimseen" $base }}
        # A restart after a switch that was not confirmed: the worker may still be
        # talking to the old hub.
        - alert: HubFollowerWorkerRestartUnverified
          expr: |
            sum without (mode, outcome) (increase(kubeslice_worker_hub_worker_restarts_total{outcome=~"unverified|not_found|permission_denied|unkillable"}[1h])) > 0
          labels:
            severity: warning
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: A worker restart after a hub switch was not verified.
            description: {{ `hub-follower in {{ $labels.namespace }}/{{ $labels.pod }} moved the worker after a switch, and in the last hour a move ended as unverified, not_found, permission_denied or unkillable (kubeslice_worker_hub_worker_restarts_total): the worker may still be on the old hub, or a stuck process may be left on the node.` | quote }}
            runbook_url: {{ printf "%s#hubfollowerworkerrestartunverified" $base }}
        {{- if $hf.watch.enabled }}
        # A hub answers probes but its watch has been down for for.watchDown: usually the
        # identity lacks `list`/`watch` on clusters, or a proxy breaks streaming. Polling
        # still follows a failover, only without the fast path.
        - alert: HubFollowerWatchDown
          expr: |
            (kubeslice_worker_hub_watch_up == 0)
            and
            (time() - kubeslice_worker_hub_last_probe_success_timestamp_seconds) < {{ $stale }}
          for: {{ $rule.for.watchDown }}
          labels:
            severity: warning
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower cannot watch a hub that answers its probes.
            description: {{ printf "The watch of the {{ $labels.hub }} hub by {{ $labels.namespace }}/{{ $labels.pod }} has been down for %s while the hub answers probes. Failover is still followed by polling, only more slowly." $rule.for.watchDown | quote }}
            runbook_url: {{ printf "%s#hubfollowerwatchdown" $base }}
        {{- end }}
        - alert: HubFollowerSwitchFlapping
          expr: |
            increase(kubeslice_worker_hub_switches_total[{{ $rule.flappingWindow }}]) >= {{ $rule.flappingSwitches | int64 }}
          labels:
            severity: warning
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower switches hubs back and forth.
            description: {{ printf "hub-follower in {{ $labels.namespace }}/{{ $labels.pod }} switched hubs {{ $value | humanize }} times in %s." $rule.flappingWindow | quote }}
            runbook_url: {{ printf "%s#hubfollowerswitchflapping" $base }}
        # A switch held back for for.switchHeld for a reason that needs an operator:
        # unauthenticated, pinned_hub_unreachable, drain_no_alternative. Not
        # older_than_basis (the steady state after a failover while the old hub keeps its
        # stale claim; a dead hub under the worker is HubFollowerActiveHubUnreachable's)
        # and not split_brain (HubFollowerSplitBrain's). The gauge is pre-created for
        # every `why`; the alert has the `why` label.
        - alert: HubFollowerSwitchHeld
          expr: |
            kubeslice_worker_hub_switch_held{why=~"unauthenticated|pinned_hub_unreachable|drain_no_alternative"} == 1
          for: {{ $rule.for.switchHeld }}
          labels:
            severity: warning
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: {{ `hub-follower holds a hub switch back ({{ $labels.why }}).` | quote }}
            description: {{ printf "hub-follower in {{ $labels.namespace }}/{{ $labels.pod }} has held a hub switch back for %s, why: {{ $labels.why }}; the worker stays on its hub. The held switch is in /status .held and in the pod's HubSwitchHeld Event." $rule.for.switchHeld | quote }}
            runbook_url: {{ printf "%s#hubfollowerswitchheld" $base }}
        # Two hubs each claim themselves at the same epoch (the worker's own hub counted
        # by the claim the worker erased), and that would move the worker: it moves at
        # most once per splitBrainWindow. The fix is the controllers'; a pin holds the
        # worker meanwhile (only with the overrides volume, which reads it).
        - alert: HubFollowerSplitBrain
          expr: |
            kubeslice_worker_hub_split_brain == 1
          for: {{ $rule.for.splitBrain }}
          labels:
            severity: critical
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: hub-follower sees two hubs each claiming to be Active.
            {{- if include "hub-follower.overrides" . }}
            description: {{ printf "Two hubs each claim to be Active at the same epoch, seen by {{ $labels.namespace }}/{{ $labels.pod }} for %s. The worker moves at most once per splitBrainWindow (%s). Pin the right hub (hub-follower.kubeslice.io/pin annotation) until the controllers agree; see the pod's HubSplitBrain Event." $rule.for.splitBrain $hf.splitBrainWindow | quote }}
            {{- else }}
            description: {{ printf "Two hubs each claim to be Active at the same epoch, seen by {{ $labels.namespace }}/{{ $labels.pod }} for %s. The worker moves at most once per splitBrainWindow (%s). Fix the controllers' leader election (pin and drain are off: overrides.enabled is false); see the pod's HubSplitBrain Event." $rule.for.splitBrain $hf.splitBrainWindow | quote }}
            {{- end }}
            runbook_url: {{ printf "%s#hubfollowersplitbrain" $base }}
        {{- if include "hub-follower.overrides" . }}
        # A pin or drain annotation's value was refused (malformed, unknown_hub,
        # too_far, conflict, past) and has stayed refused for for.overrideRefused; a pin or
        # drain already in effect stays. Rendered only with the overrides volume.
        - alert: HubFollowerOverrideRefused
          expr: |
            kubeslice_worker_hub_override_refused == 1
          for: {{ $rule.for.overrideRefused }}
          labels:
            severity: warning
            {{- with $rule.alertLabels }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          annotations:
            summary: {{ `hub-follower refused the value of the {{ $labels.kind }} annotation.` | quote }}
            description: {{ printf "hub-follower in {{ $labels.namespace }}/{{ $labels.pod }} has refused the value of its hub-follower.kubeslice.io/{{ $labels.kind }} annotation for %s; a {{ $labels.kind }} already in effect stays in effect. The reason is in the pod's HubOverrideRefused Event and in /status .overrides.refused.{{ $labels.kind }}." $rule.for.overrideRefused | quote }}
            runbook_url: {{ printf "%s#hubfolloweroverriderefused" $base }}
        {{- end }}
{{- end -}}
{{- end -}}

{{/*
The Grafana dashboard's JSON, files/dashboard.json of this chart. A library template
renders in the parent, whose .Files are the parent's own, so the file is read through
the parent's .Subcharts (Helm 3.7 and later), under the dependency's alias.
*/}}
{{- define "hub-follower.dashboardJSON" -}}
{{- $library := index (.Subcharts | default dict) "hubFollower" -}}
{{- $json := "" -}}
{{- if $library }}{{ $json = $library.Files.Get "files/dashboard.json" }}{{ end -}}
{{- if not $json -}}
{{- fail "hubFollower.dashboard.enabled: the dashboard (files/dashboard.json of the hub-follower chart) cannot be read; it needs Helm 3.7 or later (.Subcharts) and the dependency declared with `alias: hubFollower`" -}}
{{- end -}}
{{- trimSuffix "\n" $json -}}
{{- end -}}

{{/*
A ConfigMap with the Grafana dashboard, as a complete document, when
hubFollower.enabled and hubFollower.dashboard.enabled. It carries the label the
Grafana sidecar finds dashboards by (dashboard.label: dashboard.labelValue;
kube-prometheus-stack's defaults) and dashboard.annotations, e.g. grafana_folder.
*/}}
{{- define "hub-follower.dashboard" -}}
{{- $d := .Values.hubFollower.dashboard -}}
{{- if and (include "hub-follower.enabled" .) $d.enabled -}}
{{- if has (toString $d.label) (list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/managed-by") -}}
{{- fail (printf "hubFollower.dashboard.label: %q is one of the labels the chart sets itself; use the label your Grafana sidecar selects, e.g. grafana_dashboard" (toString $d.label)) -}}
{{- end -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-hub-follower-dashboard" .Release.Name | trunc 63 | trimSuffix "-" }}
  namespace: {{ $d.namespace | default .Release.Namespace }}
  labels:
    app.kubernetes.io/name: hub-follower
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/managed-by: {{ .Release.Service }}
    {{ $d.label | quote }}: {{ $d.labelValue | toString | quote }}
  {{- with $d.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  hub-follower.json: |-
    {{- include "hub-follower.dashboardJSON" . | nindent 4 }}
{{- end -}}
{{- end -}}

{{/*
The RBAC for Kubernetes Events (takes (dict "root" $ "namespace" NS "deployment" MAP)):
a Role that may create and patch Events in both API groups that serve them (the core
group and events.k8s.io) and a RoleBinding of it to the worker pod's service
account, both named <Deployment name>-hub-follower-events, in the Deployment's
namespace. The service account is the patched pod spec's serviceAccountName, else its
deprecated serviceAccount, else `default`, the one Kubernetes gives a pod that names
none. Nothing unless events.enabled and events.rbac.create.
*/}}
{{- define "hub-follower.eventsRBAC" -}}
{{- $root := .root -}}
{{- $ev := $root.Values.hubFollower.events -}}
{{- if and $ev.enabled $ev.rbac.create -}}
{{- $pod := .deployment.spec.template.spec -}}
{{- $sa := $pod.serviceAccountName | default $pod.serviceAccount | default "default" | toString -}}
{{- $name := printf "%s-hub-follower-events" .deployment.metadata.name | trunc 63 | trimSuffix "-" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ .namespace }}
  labels:
    app.kubernetes.io/name: hub-follower
    app.kubernetes.io/instance: {{ $root.Release.Name }}
    app.kubernetes.io/managed-by: {{ $root.Release.Service }}
rules:
  - apiGroups: ["", "events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ .namespace }}
  labels:
    app.kubernetes.io/name: hub-follower
    app.kubernetes.io/instance: {{ $root.Release.Name }}
    app.kubernetes.io/managed-by: {{ $root.Release.Service }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ .namespace }}
{{- end -}}
{{- end -}}

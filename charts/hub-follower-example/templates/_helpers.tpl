{{- define "example.fullname" -}}
{{- printf "%s-worker" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "example.labels" -}}
app.kubernetes.io/name: kubeslice-worker
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

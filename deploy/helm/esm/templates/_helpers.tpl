{{/* The name of every object: the release's. */}}
{{- define "esm.name" -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels of every object, and the pods' selector. */}}
{{- define "esm.labels" -}}
app.kubernetes.io/name: {{ include "esm.name" . }}
{{- end -}}

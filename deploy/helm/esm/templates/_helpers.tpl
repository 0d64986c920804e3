{{/* The name of every object: the release's. */}}
{{- define "esm.name" -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels of every object, and the pods' selector. */}}
{{- define "esm.labels" -}}
app.kubernetes.io/name: {{ include "esm.name" . }}
{{- end -}}

{{/* The ServiceAccount the pods run as. */}}
{{- define "esm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "esm.name" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The --invoke target of the function: exactly one of function.sidecar, .exec, .lambda. */}}
{{- define "esm.invoke" -}}
{{- $f := .Values.function | default dict -}}
{{- if not (or $f.sidecar $f.exec $f.lambda) -}}
{{- fail "no function to invoke: set function.sidecar.image (the function's Lambda container image, run beside esm), function.exec.path (a bootstrap in esm's image, e.g. /var/task/bootstrap) or function.lambda.name (a function on AWS Lambda); deploy/helm/esm/examples shows each" -}}
{{- end -}}
{{- if $f.sidecar -}}
{{- printf "http://127.0.0.1:%v" ($f.sidecar.port | default 8080) -}}
{{- else if $f.exec -}}
{{- printf "exec:%s" (concat (list $f.exec.path) ($f.exec.args | default list) | join " ") -}}
{{- else -}}
{{- printf "lambda:%s" $f.lambda.name -}}
{{- end -}}
{{- end -}}

{{/* Every container's security context: a non-root user by number, no privilege, a read-only
root file system (/tmp is an emptyDir, as Lambda's is the only writable path). */}}
{{- define "esm.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The controller this release runs: its name is every object's name. */}}
{{- define "tj.name" -}}
{{- if eq .Values.role "manager" }}trainjob-dispatcher{{ else }}trainjob-worker-controller{{ end -}}
{{- end }}

{{/* "true" when this release runs a controller: always on a manager; on a worker unless
worker.controller.enabled is false (a worker that runs Kubeflow Trainer: only the manager's
identity is installed there). */}}
{{- /* A worker controller that takes Kubeflow Trainer's progress reports, on a port of their own. */ -}}
{{- define "tj.progress" -}}
{{- if and (ne .Values.role "manager") (ne (toString (dig "progressReports" true .Values.config)) "false") }}true{{ end -}}
{{- end }}

{{- define "tj.controller" -}}
{{- if not (has .Values.role (list "manager" "worker")) }}
{{- fail "set role to manager (the dispatcher, on the manager cluster) or worker (the worker controller, on each worker cluster)" }}
{{- end }}
{{- if or (eq .Values.role "manager") .Values.worker.controller.enabled }}true{{ end -}}
{{- end }}

{{- define "tj.command" -}}
{{- if eq .Values.role "manager" }}trainjob-dispatcher{{ else }}trainjob-worker-controller{{ end -}}
{{- end }}

{{- define "tj.container" -}}
{{- if eq .Values.role "manager" }}dispatcher{{ else }}worker-controller{{ end -}}
{{- end }}

{{- define "tj.image" -}}
{{- $i := .Values.image -}}
{{- $ref := printf "%s/%s" $i.registry $i.repository | trimPrefix "/" -}}
{{- if $i.digest }}{{ printf "%s@%s" $ref $i.digest }}{{ else }}{{ printf "%s:%s" $ref (default .Chart.AppVersion $i.tag) }}{{ end -}}
{{- end }}

{{/* Labels of every object; selectorLabels are the Deployment's selector (never change). */}}
{{- define "tj.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tj.name" . }}
{{- end }}

{{- define "tj.uiLabels" -}}
app.kubernetes.io/name: trainjob-ui
app.kubernetes.io/part-of: trainjob-multicluster
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tj.labels" -}}
{{ include "tj.selectorLabels" . }}
app.kubernetes.io/part-of: trainjob-multicluster
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Labels of our CRDs: the product's and Helm's, not a controller's name (both roles own
the same CRDs on a cluster). */}}
{{- define "tj.crdLabels" -}}
app.kubernetes.io/part-of: trainjob-multicluster
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The webhooks leave these namespaces alone: the values' list and the release's own. */}}
{{- define "tj.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ concat .Values.webhook.excludedNamespaces (list .Release.Namespace) | uniq | toJson }}
{{- end }}

{{- define "tj.webhookCommon" -}}
admissionReviewVersions: [v1]
sideEffects: None
failurePolicy: {{ .Values.webhook.failurePolicy }}
timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
{{ include "tj.namespaceSelector" . }}
{{- end }}

{{- define "tj.certManagerAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "tj.name" . }}-webhook
{{- end }}
{{- end }}

{{- /* The APIService of the dispatcher's view.trainjob.dev API (manager). */ -}}
{{- define "tj.jobStoryApiService" -}}
v1alpha1.view.trainjob.dev
{{- end }}

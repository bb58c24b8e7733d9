{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "ais.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name prefix of every object: release + chart, unless the release name already has the chart's. */}}
{{- define "ais.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "ais.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ais.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ascend-inference-operator
{{- end }}

{{/* Labels that select the operator pods (immutable in the Deployment selector: never change them). */}}
{{- define "ais.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ais.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "ais.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ais.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image: repository@digest when a digest is set, else repository:tag (appVersion by default). */}}
{{- define "ais.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when the operator watches every namespace (no watchNamespaces). */}}
{{- define "ais.clusterwide" -}}
{{- if empty .Values.operator.watchNamespaces }}true{{ end }}
{{- end }}

{{/* "true" when kopf peering is on (several replicas). */}}
{{- define "ais.peering" -}}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{- define "ais.peeringName" -}}
{{- default (include "ais.fullname" .) .Values.operator.peeringName }}
{{- end }}

{{/* Names and labels shared by every template. */}}

{{- define "muster.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-muster, or just <release> when it already contains the chart name. */}}
{{- define "muster.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "muster.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "muster.labels" -}}
helm.sh/chart: {{ include "muster.chart" . }}
app.kubernetes.io/name: {{ include "muster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels; call with (dict "ctx" $ "component" "scheduler"). */}}
{{- define "muster.selectorLabels" -}}
app.kubernetes.io/name: {{ include "muster.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "muster.schedulerName" -}}
{{- printf "%s-scheduler" (include "muster.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "muster.agentName" -}}
{{- printf "%s-topology" (include "muster.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "muster.schedulerServiceAccount" -}}
{{- default (include "muster.schedulerName" .) .Values.serviceAccount.scheduler.name }}
{{- end }}

{{- define "muster.agentServiceAccount" -}}
{{- default (include "muster.agentName" .) .Values.serviceAccount.agent.name }}
{{- end }}

{{- define "muster.leaseName" -}}
{{- default (include "muster.schedulerName" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "muster.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.leaseNamespace }}
{{- end }}

{{- define "muster.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The container securityContext both workloads share: nothing beyond what they need. */}}
{{- define "muster.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
A list of strings as CEL string literals, comma-separated: 'a', 'b'.
*/}}
{{- define "muster.quotedKeys" -}}
{{- $out := list }}{{ range . }}{{ $out = append $out (printf "'%s'" .) }}{{ end }}{{ join ", " $out }}
{{- end }}

{{/* The chart's name, for the app.kubernetes.io/name label. */}}
{{- define "playground.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: "playground" for a release named playground. */}}
{{- define "playground.fullname" -}}
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

{{/* A component's object name: (dict "root" $ "component" "agent"). */}}
{{- define "playground.componentName" -}}
{{- printf "%s-%s" (include "playground.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The selector labels of a component's pods: (dict "root" $ "component" "agent"). */}}
{{- define "playground.selectorLabels" -}}
app.kubernetes.io/name: {{ include "playground.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The labels of a component's objects: (dict "root" $ "component" "agent"). */}}
{{- define "playground.labels" -}}
{{ include "playground.selectorLabels" . }}
app.kubernetes.io/part-of: playground
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels of a component's pods: no version, so that a chart upgrade
that changes nothing else does not restart them (the agents' restarts end
running jobs). (dict "root" $ "component" "agent") */}}
{{- define "playground.podLabels" -}}
{{ include "playground.selectorLabels" . }}
app.kubernetes.io/part-of: playground
{{- end }}

{{- define "playground.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The namespace of the Leases and of the components' Roles. */}}
{{- define "playground.leaseNamespace" -}}
{{- default "playground-system" .Values.leaseNamespace }}
{{- end }}

{{/* A pod's preferred spreading over nodes, unless affinity is given: (dict "root" $ "component" "gateway" "affinity" .Values.gateway.affinity). */}}
{{- define "playground.affinity" -}}
{{- if .affinity }}
{{- toYaml .affinity }}
{{- else }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "playground.selectorLabels" . | nindent 10 }}
{{- end }}
{{- end }}

{{/* The hardened security context of the manager's and the gateway's pods. */}}
{{- define "playground.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "playground.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
  - ALL
{{- end }}

{{/*
The flags of the worker endpoint policy, the same for the manager and the
gateway.
*/}}
{{- define "playground.workerEndpointArgs" -}}
{{- range .Values.workerEndpoints.allowCIDRs }}
- --worker-endpoint-allow-cidr={{ . }}
{{- end }}
{{- range .Values.workerEndpoints.denyCIDRs }}
- --worker-endpoint-deny-cidr={{ . }}
{{- end }}
{{- end -}}

{{/*
The audit trail's and the traces' flags of the gateway and the agents
(docs/operations.md); none with the defaults.
*/}}
{{- define "playground.observabilityArgs" -}}
{{- if ne .Values.audit.level "Metadata" }}
- --audit-level={{ .Values.audit.level }}
{{- end }}
{{- with .Values.audit.webhookURL }}
- --audit-webhook-url={{ . }}
{{- end }}
{{- with .Values.tracing.endpoint }}
- --trace-endpoint={{ . }}
- --trace-sample-ratio={{ $.Values.tracing.sampleRatio }}
{{- end }}
{{- end -}}

{{- define "vineyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "vineyard.fullname" -}}
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

{{- define "vineyard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "vineyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The daemons' selector. */}}
{{- define "vineyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vineyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: vineyardd
{{- end }}

{{- define "vineyard.etcdSelectorLabels" -}}
app.kubernetes.io/name: {{ include "vineyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: etcd
{{- end }}

{{- define "vineyard.etcdName" -}}
{{- printf "%s-etcd" (include "vineyard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* etcd's client URLs, comma-separated; "" when the daemons keep metadata local. */}}
{{- define "vineyard.etcdEndpoints" -}}
{{- if .Values.etcd.bundled }}
{{- $name := include "vineyard.etcdName" . }}
{{- $urls := list }}
{{- range $i := until (int .Values.etcd.replicas) }}
{{- $urls = append $urls (printf "http://%s-%d.%s.%s.svc:2379" $name $i $name $.Release.Namespace) }}
{{- end }}
{{- join "," $urls }}
{{- else }}
{{- join "," .Values.etcd.endpoints }}
{{- end }}
{{- end }}

{{- define "vineyard.rpcSecretName" -}}
{{- default (printf "%s-rpc" (include "vineyard.fullname" .)) .Values.rpc.auth.existingSecret }}
{{- end }}

{{- define "vineyard.peerSecretName" -}}
{{- default (printf "%s-peer" (include "vineyard.fullname" .)) .Values.peer.auth.existingSecret }}
{{- end }}

{{/*
A secret's value: the one given, else the one already in the cluster (kept
across upgrades), else a new random one.
*/}}
{{- define "vineyard.secretValue" -}}
{{- $given := index . 0 }}{{- $name := index . 1 }}{{- $ctx := index . 2 }}
{{- if $given }}
{{- $given | b64enc }}
{{- else }}
{{- $old := lookup "v1" "Secret" $ctx.Release.Namespace $name }}
{{- if and $old $old.data (index $old.data "secret") }}
{{- index $old.data "secret" }}
{{- else }}
{{- randAlphaNum 40 | b64enc }}
{{- end }}
{{- end }}
{{- end }}

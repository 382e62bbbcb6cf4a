{{/* The chart's name, or nameOverride. */}}
{{- define "cluster-autoscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names: fullnameOverride, else the release name (with the chart's name unless it
contains it). Release `cluster-autoscaler` gives the names of deploy/. */}}
{{- define "cluster-autoscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "cluster-autoscaler.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the pods. */}}
{{- define "cluster-autoscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cluster-autoscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "cluster-autoscaler.labels" -}}
{{ include "cluster-autoscaler.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The ServiceAccount the pods run as. */}}
{{- define "cluster-autoscaler.serviceAccountName" -}}
{{- if .Values.rbac.serviceAccount.create -}}
{{- default (include "cluster-autoscaler.fullname" .) .Values.rbac.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.rbac.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The value of --node-group-auto-discovery after `clusterapi:` (empty: no flag). */}}
{{- define "cluster-autoscaler.autoDiscovery" -}}
{{- $parts := list -}}
{{- with .Values.autoDiscovery.namespace }}{{ $parts = append $parts (printf "namespace=%s" .) }}{{ end -}}
{{- with .Values.autoDiscovery.clusterName }}{{ $parts = append $parts (printf "clusterName=%s" .) }}{{ end -}}
{{- range .Values.autoDiscovery.labels }}
{{- range $k, $v := . }}{{ $parts = append $parts (printf "%s=%s" $k $v) }}{{ end }}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* Whether --kubeconfig names a workload kubeconfig. */}}
{{- define "cluster-autoscaler.workloadKubeconfig" -}}
{{- if has .Values.clusterAPIMode (list "kubeconfig-incluster" "kubeconfig-kubeconfig" "single-kubeconfig") }}true{{ end -}}
{{- end -}}

{{/* The Cluster API rules (the objects of node groups and their instances), for the
ClusterRole or, with rbac.clusterScoped=false, a Role in the auto-discovery namespace. */}}
{{- define "cluster-autoscaler.clusterAPIRules" -}}
- apiGroups: {{ toJson .groups }}
  resources: ["machinedeployments", "machinesets", "machinepools"]
  verbs: ["get", "list", "watch"]
- apiGroups: {{ toJson .groups }}
  resources: ["machines"]
  verbs: ["get", "list", "watch", "update", "patch", "delete"]
- apiGroups: {{ toJson .groups }}
  resources: ["machinedeployments/scale", "machinesets/scale", "machinepools/scale"]
  verbs: ["get", "patch", "update"]
# The infrastructure machine templates the scalable resources reference (scale from zero).
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["*"]
  verbs: ["list", "watch"]
{{- end -}}

{{- /*
The templates render deploy/'s objects, whose comments say why each setting is what it is: the
agent from deploy/base/agent.yaml, the gateway and its Service from deploy/base/gateway.yaml, the
service accounts and ClusterRole from deploy/base/rbac.yaml; the layouts and options as
deploy/overlays and deploy/components change them. TestHelmMatchesKustomize (test/e2e) fails
where the two differ.

Object names are deploy/'s, not derived from the release's name: one installation per cluster
(the agents take host ports on every node, and k8s_watchdog must run once), and the Secrets'
certificate (deploy/secrets.sh) and the scrape jobs name these objects. A second release with a
gateway fails on the ClusterRole, which Helm finds owned by the first.
*/}}

{{- /* The labels a component's pods carry and its workload selects. Arguments: component, and
instance where the scale-out layout tells its two gateway Deployments apart. */}}
{{- define "otelcol-gpu.selectorLabels" -}}
app.kubernetes.io/name: otelcol-gpu
app.kubernetes.io/component: {{ .component }}
{{- with .instance }}
app.kubernetes.io/instance: {{ . }}
{{- end }}
{{- end }}

{{- /*
Every object's labels: deploy/base's (its kustomization's labels) and Helm's own, helm.sh/chart
and app.kubernetes.io/managed-by, on the objects only, not on pod templates or selectors (the
chart's version would roll every pod, and a selector cannot change). No
app.kubernetes.io/instance with the release's name: in deploy/ that label tells the scale-out
layout's OTLP gateways (otlp) and watchdog (watchdog) apart.
*/}}
{{- define "otelcol-gpu.labels" -}}
app.kubernetes.io/part-of: otelcol-gpu
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "otelcol-gpu.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- /*
A collector's ConfigMap: its config.yaml is a file of distro/, byte for byte (files/ links to it).
Pods carry the file's checksum in an annotation (checksum/config), so that a change rolls them,
as kustomize's configMapGenerator does by adding a hash of the data to the ConfigMap's name.
Arguments: the root context, the name and the file under files/.
*/}}
{{- define "otelcol-gpu.configMap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "otelcol-gpu.labels" .root | nindent 4 }}
{{ dict "data" (dict "config.yaml" (.root.Files.Get .file)) | toYaml }}
{{- end }}

{{- /*
The gateway's Deployment. Arguments: root, name (also its ConfigMap's), instance (the
app.kubernetes.io/instance label, if any), replicas, recreate (the Recreate strategy), args (after
--config).
*/}}
{{- define "otelcol-gpu.gateway" -}}
{{- $labels := include "otelcol-gpu.selectorLabels" (dict "component" "gateway" "instance" .instance) }}
{{- with .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $.name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
    {{- include "otelcol-gpu.labels" . | nindent 4 }}
spec:
  replicas: {{ $.replicas }}
  {{- if $.recreate }}
  strategy: {type: Recreate}
  {{- end }}
  selector:
    matchLabels:
      {{- $labels | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $labels | nindent 8 }}
      annotations:
        checksum/config: {{ .Files.Get "files/gateway.yaml" | sha256sum }}
    spec:
      serviceAccountName: otelcol-gpu-gateway
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      {{- with .Values.gateway.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.gateway.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: gateway
          image: {{ include "otelcol-gpu.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args:
            - --config=/etc/otelcol-gpu/config/config.yaml
            {{- range concat $.args (include "otelcol-gpu.quarantineArgs" . | fromYamlArray) .Values.gateway.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          env:
            - name: MY_POD_IP
              valueFrom: {fieldRef: {fieldPath: status.podIP}}
            - name: MY_POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: GOMEMLIMIT
              valueFrom: {resourceFieldRef: {resource: limits.memory}}
          ports:
            - {name: otlp-grpc, containerPort: 4317}
            - {name: metrics, containerPort: 9102}
            - {name: telemetry, containerPort: 9103}
            - {name: health, containerPort: 13133}
          resources:
            {{- toYaml .Values.gateway.resources | nindent 12 }}
          livenessProbe:
            httpGet: {path: /, port: health}
            initialDelaySeconds: 10
            periodSeconds: 15
            failureThreshold: 4
          readinessProbe:
            httpGet: {path: /, port: health}
            periodSeconds: 10
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts:
            - {name: config, mountPath: /etc/otelcol-gpu/config, readOnly: true}
            - {name: secret, mountPath: /var/run/secrets/otelcol-gpu, readOnly: true}
            - {name: job-records, mountPath: /var/lib/otelcol-gpu/job-records}
      volumes:
        - name: config
          configMap: {name: {{ $.name }}}
        - name: secret
          secret: {secretName: {{ .Values.gateway.secretName | quote }}, defaultMode: 0440}
        # job_record's checkpoint and the ended jobs' records (deploy/base/gateway.yaml).
        - name: job-records
          emptyDir: {sizeLimit: 2Gi}
{{- end }}
{{- end }}

{{- /* deploy/components/quarantine's and validation-gate's arguments of every gateway Deployment (the one that writes
is the base's gateway, or the scale-out layout's watchdog), as a YAML list. */}}
{{- define "otelcol-gpu.quarantineArgs" -}}
{{- if or .Values.quarantine.enabled .Values.validationGate.enabled }}
{{- if .Values.quarantine.enabled }}
- --set=connectors::k8s_gpu_health::quarantine::enabled=true
- --set=connectors::k8s_gpu_health::quarantine::dry_run={{ .Values.quarantine.dryRun }}
{{- end }}
{{- if .Values.validationGate.enabled }}
- --set=connectors::k8s_gpu_health::validation::enabled=true
- --set=connectors::k8s_gpu_health::validation::dry_run={{ .Values.validationGate.dryRun }}
{{- end }}
{{- else }}
[]
{{- end }}
{{- end }}

{{- define "horae.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "horae.labels" -}}
app.kubernetes.io/name: horae
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "planner") */}}
{{- define "horae.selector" -}}
app.kubernetes.io/name: horae
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "horae.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "horae.fullname" .) .Values.serviceAccount.name }}
{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "horae.image" -}}
{{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end -}}

{{/* a value of the chart's Secret: (dict "root" $ "key" "tenantKeys") */}}
{{- define "horae.secretRef" -}}
valueFrom:
  secretKeyRef:
    name: {{ .root.Values.secrets.existingSecret }}
    key: {{ index .root.Values.secrets.keys .key }}
{{- end -}}

{{/* the environment of one process role: (dict "root" $ "role" "planner") */}}
{{- define "horae.env" -}}
{{- $v := .root.Values -}}
- name: HORAE_KAFKA_BOOTSTRAP
  value: {{ $v.kafka.bootstrap | quote }}
- name: HORAE_KAFKA_SECURITY_PROTOCOL
  value: {{ $v.kafka.securityProtocol | quote }}
- name: HORAE_KAFKA_SASL_MECHANISM
  value: {{ $v.kafka.saslMechanism | quote }}
{{- if $v.kafka.caSecret }}
- name: HORAE_KAFKA_SSL_CA_FILE
  value: /etc/horae/kafka-ca/ca.crt
{{- end }}
- name: HORAE_TOPIC_PREFIX
  value: {{ $v.kafka.topicPrefix | quote }}
- name: HORAE_TOPIC_PARTITIONS
  value: {{ $v.kafka.partitions | quote }}
- name: HORAE_TOPIC_REPLICATION_FACTOR
  value: {{ $v.kafka.replicationFactor | quote }}
- name: HORAE_KAFKA_USERNAME
{{- if and $v.secrets.kafkaPasswordsFromStrimzi (ne .role "admin") }}
  value: {{ printf "%s-%s" (include "horae.fullname" .root) .role | quote }}  # the KafkaUser
{{- else }}
  value: {{ index $v.kafka.users .role | quote }}
{{- end }}
- name: HORAE_KAFKA_PASSWORD
{{- if and $v.secrets.kafkaPasswordsFromStrimzi (ne .role "admin") }}
  valueFrom:
    secretKeyRef:
      name: {{ printf "%s-%s" (include "horae.fullname" .root) .role }}
      key: password
{{- else }}
  {{- include "horae.secretRef" (dict "root" .root "key" (printf "kafka%sPassword" (title .role))) | nindent 2 }}
{{- end }}
- name: HORAE_DATABASE_URL
  {{- include "horae.secretRef" (dict "root" .root "key" "databaseUrl") | nindent 2 }}
- name: HORAE_PROJECTOR_DATABASE_URL
  {{- include "horae.secretRef" (dict "root" .root "key" "projectorDatabaseUrl") | nindent 2 }}
- name: HORAE_READER_DATABASE_URL
  {{- include "horae.secretRef" (dict "root" .root "key" "readerDatabaseUrl") | nindent 2 }}
- name: HORAE_API_DATABASE_URL
  {{- include "horae.secretRef" (dict "root" .root "key" "apiDatabaseUrl") | nindent 2 }}
- name: HORAE_TENANT_KEYS
  {{- include "horae.secretRef" (dict "root" .root "key" "tenantKeys") | nindent 2 }}
- name: HORAE_PLATFORM_KEY
  {{- include "horae.secretRef" (dict "root" .root "key" "platformKey") | nindent 2 }}
- name: HORAE_DISPATCHER_WEBHOOK_SECRETS
  {{- include "horae.secretRef" (dict "root" .root "key" "webhookSecrets") | nindent 2 }}
{{- range $name, $value := $v.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "horae.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.kafka.caSecret }}
- name: kafka-ca
  mountPath: /etc/horae/kafka-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "horae.volumes" -}}
- name: tmp
  emptyDir: {medium: Memory, sizeLimit: 64Mi}
{{- if .Values.kafka.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.caSecret }}
{{- end }}
{{- end -}}

{{/* probes of a worker: the image's probe asks its /metrics on the pod's loopback */}}
{{- define "horae.workerProbes" -}}
readinessProbe:
  exec:
    command: ["/opt/horae/venv/bin/python", "/opt/horae/healthcheck.py"]
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 5
livenessProbe:
  exec:
    command: ["/opt/horae/venv/bin/python", "/opt/horae/healthcheck.py"]
  initialDelaySeconds: 60
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{- define "horae.podCommon" -}}
serviceAccountName: {{ include "horae.serviceAccount" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

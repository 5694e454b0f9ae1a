{{/* Chart name. */}}
{{- define "ldpstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, or fullnameOverride. */}}
{{- define "ldpstream.fullname" -}}
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

{{- define "ldpstream.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "ldpstream.labels" -}}
helm.sh/chart: {{ include "ldpstream.chart" . }}
app.kubernetes.io/name: {{ include "ldpstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ldpstream
{{- end }}

{{/* Selector labels of one component: include "ldpstream.selectorLabels" (list . "api"). */}}
{{- define "ldpstream.selectorLabels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "ldpstream.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "ldpstream.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "ldpstream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ldpstream.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ldpstream.secretName" -}}
{{- default (printf "%s-secrets" (include "ldpstream.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{/* Environment of workers and API: Kafka and Redis. */}}
{{- define "ldpstream.env" -}}
{{ include "ldpstream.kafkaEnv" . }}
{{ include "ldpstream.redisEnv" . }}
{{- end }}

{{/* Kafka connection (the simulator gets only this: devices never see Redis). */}}
{{- define "ldpstream.kafkaEnv" -}}
- name: LDP_KAFKA_BOOTSTRAP
  value: {{ required "kafka.bootstrapServers is required" .Values.kafka.bootstrapServers | quote }}
- name: LDP_REPORTS_TOPIC
  value: {{ .Values.kafka.reportsTopic | quote }}
- name: LDP_DLQ_TOPIC
  value: {{ .Values.kafka.dlqTopic | quote }}
- name: LDP_KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
{{- if hasPrefix "SASL_" .Values.kafka.securityProtocol }}
- name: LDP_KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: LDP_KAFKA_SASL_USERNAME
  value: {{ required "kafka.sasl.username is required with SASL" .Values.kafka.sasl.username | quote }}
- name: LDP_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "ldpstream.secretName" . }}
      key: kafka-sasl-password
{{- end }}
{{- if .Values.kafka.tls.caSecret }}
- name: LDP_KAFKA_SSL_CAFILE
  value: /etc/ldpstream/kafka-ca/{{ .Values.kafka.tls.caKey }}
{{- end }}
{{- if .Values.kafka.tls.clientSecret }}
- name: LDP_KAFKA_SSL_CERTFILE
  value: /etc/ldpstream/kafka-client/tls.crt
- name: LDP_KAFKA_SSL_KEYFILE
  value: /etc/ldpstream/kafka-client/tls.key
{{- end }}
- name: LDP_KAFKA_SSL_CHECK_HOSTNAME
  value: {{ .Values.kafka.tls.checkHostname | quote }}
{{- end }}

{{/* Redis connection. */}}
{{- define "ldpstream.redisEnv" -}}
- name: LDP_REDIS_URL
  value: {{ required "redis.url is required" .Values.redis.url | quote }}
- name: LDP_REDIS_PREFIX
  value: {{ .Values.redis.prefix | quote }}
{{- if and .Values.redis.sentinels .Values.redis.cluster }}
{{- fail "redis.sentinels and redis.cluster cannot both be set" }}
{{- end }}
{{- with .Values.redis.sentinels }}
- name: LDP_REDIS_SENTINELS
  value: {{ . | quote }}
- name: LDP_REDIS_MASTER_NAME
  value: {{ $.Values.redis.masterName | quote }}
{{- end }}
{{- with .Values.redis.cluster }}
- name: LDP_REDIS_CLUSTER
  value: {{ . | quote }}
{{- end }}
{{- with .Values.redis.username }}
- name: LDP_REDIS_USERNAME
  value: {{ . | quote }}
{{- end }}
- name: LDP_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "ldpstream.secretName" . }}
      key: redis-password
      optional: true
{{- if .Values.redis.tls.caSecret }}
- name: LDP_REDIS_TLS_CA_FILE
  value: /etc/ldpstream/redis-ca/{{ .Values.redis.tls.caKey }}
{{- end }}
{{- if .Values.redis.tls.clientSecret }}
- name: LDP_REDIS_TLS_CERT_FILE
  value: /etc/ldpstream/redis-client/tls.crt
- name: LDP_REDIS_TLS_KEY_FILE
  value: /etc/ldpstream/redis-client/tls.key
{{- end }}
{{- end }}

{{/* Volumes: /tmp (read-only root fs), collections, TLS material. */}}
{{- define "ldpstream.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
- name: collections
  configMap:
    name: {{ include "ldpstream.fullname" . }}-collections
{{- with .Values.kafka.tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.kafka.tls.clientSecret }}
- name: kafka-client
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.redis.tls.caSecret }}
- name: redis-ca
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.redis.tls.clientSecret }}
- name: redis-client
  secret:
    secretName: {{ . }}
{{- end }}
{{- end }}

{{- define "ldpstream.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: collections
  mountPath: /etc/ldpstream/collections
  readOnly: true
{{- if .Values.kafka.tls.caSecret }}
- name: kafka-ca
  mountPath: /etc/ldpstream/kafka-ca
  readOnly: true
{{- end }}
{{- if .Values.kafka.tls.clientSecret }}
- name: kafka-client
  mountPath: /etc/ldpstream/kafka-client
  readOnly: true
{{- end }}
{{- if .Values.redis.tls.caSecret }}
- name: redis-ca
  mountPath: /etc/ldpstream/redis-ca
  readOnly: true
{{- end }}
{{- if .Values.redis.tls.clientSecret }}
- name: redis-client
  mountPath: /etc/ldpstream/redis-client
  readOnly: true
{{- end }}
{{- end }}

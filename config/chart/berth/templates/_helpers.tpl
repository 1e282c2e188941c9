{{/*
Names are fixed, not derived from the release name: berth-controller
injects its CA into webhook configurations of known names, its RBAC rules
name them, and the webhook configurations name the Service. One berth per
cluster, as its cluster-scoped CRDs and webhooks allow anyway.
*/}}

{{/* Labels on every object: those of config/default's `labels`. */}}
{{- define "berth.labels" -}}
app.kubernetes.io/name: berth
app.kubernetes.io/part-of: berth
{{- end }}

{{/* Labels that select the controller's pods (Deployment, Services, PDB). */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/component: controller
app.kubernetes.io/name: berth
{{- end }}

{{/* The controller image: repository[:tag][@digest]; the tag defaults to appVersion. */}}
{{- define "berth.image" -}}
{{- $ref := .Values.image.repository -}}
{{- with .Values.image.tag | default .Chart.AppVersion }}{{ $ref = printf "%s:%s" $ref . }}{{ end -}}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* Name of the cert-manager Certificate for the webhooks. */}}
{{- define "berth.certificateName" -}}
berth-webhook-cert
{{- end }}

{{/*
Annotations of the webhook configurations: with cert-manager, where its
cainjector finds the CA. Included by the generated webhook templates.
*/}}
{{- define "berth.webhookAnnotations" -}}
{{- if eq .Values.certManagement "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "berth.certificateName" . }}
{{- end }}
{{- end }}

{{/*
Annotations of the APIService: with cert-manager, where its cainjector
finds the CA (berth injects it itself otherwise).
*/}}
{{- define "berth.apiServiceAnnotations" -}}
{{- if eq .Values.certManagement "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "berth.certificateName" . }}
{{- end }}
{{- end }}

{{/*
The settings that cannot be told apart by the schema alone; a release that
would not work fails here, with the fix in the message.
*/}}
{{- define "berth.validate" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) -}}
{{- fail "leaderElection.enabled=false needs replicas: 1: replicas without a leader would all admit" -}}
{{- end -}}
{{- if and (or .Values.metrics.serviceMonitor.enabled .Values.metrics.prometheusRule.enabled) (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor and metrics.prometheusRule need metrics.enabled=true" -}}
{{- end -}}
{{- if and (or .Values.metrics.serviceMonitor.enabled .Values.metrics.prometheusRule.enabled) (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) -}}
{{- fail "metrics.serviceMonitor and metrics.prometheusRule need the monitoring.coreos.com/v1 API (prometheus-operator); with helm template, pass --api-versions monitoring.coreos.com/v1" -}}
{{- end -}}
{{- end }}

{{/*
berth-controller's arguments, one per line. The first four are always
passed, as in config/manager; every other flag only when its value is set,
so berth's own default applies otherwise (and the defaults render the
bundle's Deployment exactly).
*/}}
{{- define "berth.args" -}}
{{- $v := .Values -}}
- --leader-elect={{ $v.leaderElection.enabled }}
- --webhook-cert-management={{ eq $v.certManagement "cert-manager" | ternary "external" "self" }}
- --metrics-bind-address={{ $v.metrics.enabled | ternary (printf ":%d" (int $v.metrics.port)) "0" }}
- --health-probe-bind-address=:{{ int $v.healthProbe.port }}
{{- if not $v.metrics.secure }}
- --metrics-secure=false
{{- end }}
{{- with $v.leaderElection.leaseDuration }}
- --leader-elect-lease-duration={{ . }}
{{- end }}
{{- with $v.leaderElection.renewDeadline }}
- --leader-elect-renew-deadline={{ . }}
{{- end }}
{{- if ne (int $v.webhook.port) 9443 }}
- --webhook-port={{ int $v.webhook.port }}
{{- end }}
{{- if not $v.visibility.enabled }}
- --visibility-port=0
{{- else if ne (int $v.visibility.port) 8082 }}
- --visibility-port={{ int $v.visibility.port }}
{{- end }}
{{- with $v.webhook.certDir }}
- --webhook-cert-dir={{ . }}
{{- end }}
{{- if ne $v.webhook.secretName "berth-webhook-certs" }}
- --webhook-secret={{ $v.webhook.secretName }}
{{- end }}
{{- if eq $v.certManagement "self" }}
{{- with $v.webhook.certDNSNames }}
- --webhook-cert-dns-names={{ join "," . }}
{{- end }}
{{- with $v.webhook.certValidity }}
- --webhook-cert-validity={{ . }}
{{- end }}
{{- with $v.webhook.certRenewBefore }}
- --webhook-cert-renew-before={{ . }}
{{- end }}
{{- with $v.webhook.certCheckInterval }}
- --webhook-cert-check-interval={{ . }}
{{- end }}
{{- end }}
{{- include "berth.controllerArgs" . }}
{{- include "berth.loggingArgs" . }}
{{- range $v.controller.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The controller group's flags; null leaves berth's default. */}}
{{- define "berth.controllerArgs" -}}
{{- $c := .Values.controller -}}
{{- if not (kindIs "invalid" $c.kubeAPIQPS) }}
- --kube-api-qps={{ $c.kubeAPIQPS }}
{{- end }}
{{- if not (kindIs "invalid" $c.kubeAPIBurst) }}
- --kube-api-burst={{ int64 $c.kubeAPIBurst }}
{{- end }}
{{- with $c.queueStatusInterval }}
- --queue-status-interval={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $c.queueStatusRate) }}
- --queue-status-rate={{ $c.queueStatusRate }}
{{- end }}
{{- if not (kindIs "invalid" $c.applyWorkers) }}
- --apply-workers={{ int64 $c.applyWorkers }}
{{- end }}
{{- if not (kindIs "invalid" $c.jobWorkers) }}
- --job-workers={{ int64 $c.jobWorkers }}
{{- end }}
{{- with $c.pendingStatusDelay }}
- --pending-status-delay={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $c.fairSharing) }}
- --fair-sharing={{ $c.fairSharing }}
{{- end }}
{{- if not (kindIs "invalid" $c.localQueueFairSharing) }}
- --local-queue-fair-sharing={{ $c.localQueueFairSharing }}
{{- end }}
{{- if not (kindIs "invalid" $c.podGroups) }}
- --pod-groups={{ $c.podGroups }}
{{- end }}
{{- if not (kindIs "invalid" $c.replicaRecords) }}
- --replica-records={{ $c.replicaRecords }}
{{- end }}
{{- if not (kindIs "invalid" $c.localQueueMetrics) }}
- --local-queue-metrics={{ $c.localQueueMetrics }}
{{- end }}
{{- if not (kindIs "invalid" $c.notifications) }}
- --notifications={{ $c.notifications }}
{{- end }}
{{- with $c.notificationAllowedCIDRs }}
- --notification-allowed-cidrs={{ join "," . }}
{{- end }}
{{- with $c.clusterServiceCIDRs }}
- --cluster-service-cidrs={{ join "," . }}
{{- end }}
{{- with $c.clusterPodCIDRs }}
- --cluster-pod-cidrs={{ join "," . }}
{{- end }}
{{- with $c.notificationSlackHosts }}
- --notification-slack-hosts={{ join "," . }}
{{- end }}
{{- if not (kindIs "invalid" $c.notificationWorkers) }}
- --notification-workers={{ int64 $c.notificationWorkers }}
{{- end }}
{{- if not (kindIs "invalid" $c.notificationPoliciesPerNamespace) }}
- --notification-policies-per-namespace={{ int64 $c.notificationPoliciesPerNamespace }}
{{- end }}
{{- with $c.draDeviceClasses }}
- --dra-device-class={{ join "," . }}
{{- end }}
{{- with $c.headroomPlaceholderImage }}
- --headroom-placeholder-image={{ . }}
{{- end }}
{{- with $c.headroomMechanism }}
- --headroom-mechanism={{ . }}
{{- end }}
{{- end }}

{{/* The logging group's flags (controller-runtime's zap flags). */}}
{{- define "berth.loggingArgs" -}}
{{- $l := .Values.logging -}}
{{- with $l.level }}
- --zap-log-level={{ . }}
{{- end }}
{{- with $l.encoder }}
- --zap-encoder={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $l.development) }}
- --zap-devel={{ $l.development }}
{{- end }}
{{- with $l.stacktraceLevel }}
- --zap-stacktrace-level={{ . }}
{{- end }}
{{- with $l.timeEncoding }}
- --zap-time-encoding={{ . }}
{{- end }}
{{- end }}

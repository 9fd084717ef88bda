{{/* The labels every object carries; `component` is agent or cleanup. */}}
{{- define "palisade.labels" -}}
app.kubernetes.io/name: palisade
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The agent's name: its ServiceAccount, ClusterRole, binding and DaemonSet. */}}
{{- define "palisade.agent" -}}
{{ .Release.Name }}-agent
{{- end }}

{{/* The image, tag defaulting to the chart's appVersion. */}}
{{- define "palisade.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* ADDRESS:PORT of the metrics listener; an IPv6 address in brackets. */}}
{{- define "palisade.metricsListen" -}}
{{- if contains ":" .Values.metrics.address -}}
[{{ .Values.metrics.address }}]:{{ .Values.metrics.port }}
{{- else -}}
{{ .Values.metrics.address }}:{{ .Values.metrics.port }}
{{- end }}
{{- end }}

{{/* The container security context of the agent and of the uninstall step: root in the
node's network namespace, NET_ADMIN and nothing else. */}}
{{- define "palisade.securityContext" -}}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
# nftables and netlink need the root user inside the node's network
# namespace; the capability set is what limits it. Learning domain names adds raw
# sockets (NET_RAW), to send held DNS replies on.
runAsUser: 0
capabilities:
  drop: [ALL]
  add: [NET_ADMIN{{ if .Values.domainNames.resolvers }}, NET_RAW{{ end }}]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Name of the Service (and the DNS name proxies and the API server use). */}}
{{- define "rudder.serviceName" -}}
{{- $base := ternary "istiod" "rudder" .Values.service.istiodName -}}
{{- if eq .Values.revision "default" -}}{{ $base }}{{- else -}}{{ $base }}-{{ .Values.revision }}{{- end -}}
{{- end -}}

{{/* Name of the Deployment, ServiceAccount and RBAC objects. */}}
{{- define "rudder.fullname" -}}
{{- if eq .Values.revision "default" -}}rudder{{- else -}}rudder-{{ .Values.revision }}{{- end -}}
{{- end -}}

{{- define "rudder.labels" -}}
app: istiod
istio: pilot
istio.io/rev: {{ .Values.revision | quote }}
app.kubernetes.io/name: rudder
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rudder.selectorLabels" -}}
app: istiod
istio.io/rev: {{ .Values.revision | quote }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rudder.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

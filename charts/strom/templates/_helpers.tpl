{{- define "strom.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strom.operatorName" -}}
{{- printf "%s-operator" (include "strom.fullname" .) -}}
{{- end -}}

{{- define "strom.selectorLabels" -}}
app.kubernetes.io/name: strom-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strom.labels" -}}
{{ include "strom.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: strom
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "strom.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strom.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "strom.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

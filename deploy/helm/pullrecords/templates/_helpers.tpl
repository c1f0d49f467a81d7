{{/* The project's image reference. */}}
{{- define "pullrecords.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* The namespace of everything namespaced. */}}
{{- define "pullrecords.namespace" -}}
{{- $ns := required "namespace.name is required" .Values.namespace.name -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $ns) -}}
{{- fail (printf "namespace.name %q is not a namespace name (RFC 1123 label)" $ns) -}}
{{- end -}}
{{ $ns }}
{{- end -}}

{{/* The agent's runtime preset, failing on an unknown runtime name. */}}
{{- define "pullrecords.runtime" -}}
{{- $r := index .Values.agent.runtimes .Values.agent.runtime -}}
{{- if not $r -}}
{{- fail (printf "agent.runtime %q is not one of agent.runtimes (%s)" .Values.agent.runtime (keys .Values.agent.runtimes | sortAlpha | join ", ")) -}}
{{- end -}}
{{- toYaml $r -}}
{{- end -}}

{{/* The agent's CRI socket path on the host. */}}
{{- define "pullrecords.agentSocket" -}}
{{- $r := include "pullrecords.runtime" . | fromYaml -}}
{{- $s := default $r.socket .Values.agent.socket -}}
{{- if not (hasPrefix "/" $s) -}}
{{- fail (printf "agent socket %q must be an absolute path" $s) -}}
{{- end -}}
{{ $s }}
{{- end -}}

{{/* The agent's image store directory on the host. */}}
{{- define "pullrecords.agentImageFs" -}}
{{- $r := include "pullrecords.runtime" . | fromYaml -}}
{{- $d := default $r.imageFs .Values.agent.imageFs -}}
{{- if not (hasPrefix "/" $d) -}}
{{- fail (printf "agent imageFs %q must be an absolute path" $d) -}}
{{- end -}}
{{ $d }}
{{- end -}}

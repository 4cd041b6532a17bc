{{/*
The services of Loom, in a fixed order. Each has a block under .Values.services.
*/}}
{{- define "loom.serviceNames" -}}
watcher renderer binder secrets
{{- end }}

{{/*
The enabled services, as a space-separated list.
*/}}
{{- define "loom.enabledServices" -}}
{{- $out := list }}
{{- range $s := splitList " " (include "loom.serviceNames" .) }}
{{- if (get $.Values.services $s).enabled }}
{{- $out = append $out $s }}
{{- end }}
{{- end }}
{{- join " " $out }}
{{- end }}

{{/*
The name of a service's objects: its Deployment, ServiceAccount and Service.
Fixed, like the ClusterRoles of files/rbac, so that docs and tools can name
them: install Loom once per cluster.
*/}}
{{- define "loom.name" -}}
loom-{{ . }}
{{- end }}

{{- define "loom.chart" -}}
{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
Labels of every object. Call with (dict "root" $ "service" "renderer"); service
may be empty.
*/}}
{{- define "loom.labels" -}}
helm.sh/chart: {{ include "loom.chart" .root }}
app.kubernetes.io/name: loom
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: loom
{{- with .service }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/*
Selector labels of a service's pods. Call with (dict "root" $ "service" "renderer").
*/}}
{{- define "loom.selectorLabels" -}}
app.kubernetes.io/name: loom
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .service }}
{{- end }}

{{/*
A service's image. Call with (dict "root" $ "service" "renderer").
*/}}
{{- define "loom.image" -}}
{{- $img := .root.Values.image }}
{{- $repo := printf "%s-%s" $img.repository .service }}
{{- if $img.registry }}{{ $repo = printf "%s/%s" $img.registry $repo }}{{ end }}
{{- $digest := get ($img.digests | default dict) .service }}
{{- if $digest }}
{{- printf "%s@%s" $repo $digest }}
{{- else }}
{{- printf "%s:%s" $repo (($img.tag | default .root.Chart.AppVersion) | toString) }}
{{- end }}
{{- end }}

{{/*
A service's NATS user: nats.auth.users.<service>, else loom-<service>
(pkg/natsauth.User).
*/}}
{{- define "loom.natsUser" -}}
{{- get (.root.Values.nats.auth.users | default dict) .service | default (printf "loom-%s" .service) }}
{{- end }}

{{/*
The objects of one RBAC file, as a list of maps (YAML documents split on
---; comments and empty documents dropped). Returns JSON: {"objects": [...]}.
*/}}
{{- define "loom.rbacObjects" -}}
{{- $objs := list }}
{{- range $doc := regexSplit "(?m)^---\\s*$" . -1 }}
{{- $o := fromYaml $doc }}
{{- if hasKey $o "Error" }}
{{- fail (printf "cannot parse an RBAC file of the chart: %s" $o.Error) }}
{{- end }}
{{- if and $o (hasKey $o "kind") }}
{{- $objs = append $objs $o }}
{{- end }}
{{- end }}
{{- dict "objects" $objs | toJson }}
{{- end }}

{{/*
Whole seconds of a Go duration such as 20s, 1m or 1m30s.
*/}}
{{- define "loom.seconds" -}}
{{- $d := toString . }}
{{- $total := 0 }}
{{- range $m := regexFindAll "[0-9]+(h|ms|m|s)" $d -1 }}
{{- $n := regexFind "^[0-9]+" $m | int }}
{{- $unit := regexFind "[a-z]+$" $m }}
{{- if eq $unit "h" }}{{ $total = add $total (mul $n 3600) }}
{{- else if eq $unit "m" }}{{ $total = add $total (mul $n 60) }}
{{- else if eq $unit "s" }}{{ $total = add $total $n }}
{{- end }}
{{- end }}
{{- $total }}
{{- end }}

{{/*
"true" when the renderer hands the secrets service the connection details of
Pipeline XRs over gRPC (connectionDetails.enabled and both services
enabled), else empty.
*/}}
{{- define "loom.connectionDetails" -}}
{{- if and .Values.connectionDetails.enabled .Values.services.renderer.enabled .Values.services.secrets.enabled }}true{{ end }}
{{- end }}

{{/*
The Secrets holding the channel's certificates, as JSON:
{"server": NAME, "client": NAME, "generated": BOOL}; the chart generates them
unless both names are given.
*/}}
{{- define "loom.connectionDetailsSecrets" -}}
{{- $tls := .Values.connectionDetails.tls }}
{{- if and $tls.serverSecretName $tls.clientSecretName }}
{{- dict "server" $tls.serverSecretName "client" $tls.clientSecretName "generated" false | toJson }}
{{- else if or $tls.serverSecretName $tls.clientSecretName }}
{{- fail "connectionDetails.tls: give both serverSecretName and clientSecretName, or neither (the chart then generates both)" }}
{{- else }}
{{- dict "server" "loom-secrets-grpc" "client" "loom-renderer-grpc" "generated" true | toJson }}
{{- end }}
{{- end }}

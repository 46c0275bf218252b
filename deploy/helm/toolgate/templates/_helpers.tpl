{{/*
Names and labels. With the release named "toolgate" every object has the name of its
counterpart in deploy/k8s (toolgate, toolgate-config, toolgate-tools, toolgate-secrets, ...).
*/}}
{{- define "toolgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolgate.fullname" -}}
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

{{- define "toolgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "toolgate.labels" -}}
{{ include "toolgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "toolgate.chart" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "toolgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "toolgate.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The Secret whose keys become the container's environment: "" when there is none. */}}
{{- define "toolgate.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else if .Values.secret.create }}
{{- printf "%s-secrets" (include "toolgate.fullname" .) }}
{{- end }}
{{- end }}

{{- define "toolgate.toolsConfigMap" -}}
{{- default (printf "%s-tools" (include "toolgate.fullname" .)) .Values.tools.existingConfigMap }}
{{- end }}

{{/* The public paths toolgate serves, from the settings (Ingress rules). */}}
{{- define "toolgate.mcpPath" -}}
{{- dig "server" "mcp_path" "/mcp" .Values.settings }}
{{- end }}

{{- define "toolgate.legacySse" -}}
{{- if dig "server" "legacy_sse" true .Values.settings }}true{{ end }}
{{- end }}

{{/* The effective rate-limit backend: "local" (toolgate's default) or "redis". */}}
{{- define "toolgate.limitsBackend" -}}
{{- dig "limits" "backend" "local" .Values.settings }}
{{- end }}

{{/* More than one pod can run at once (fixed replicas > 1, or the autoscaler). */}}
{{- define "toolgate.multiReplica" -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}true{{ end }}
{{- end }}

{{/*
toolgate.toml from .Values.settings. Helm reads numbers in values files as floats and its own
toToml writes 20 as "20.0", which toolgate's integer settings refuse; this writer prints whole
numbers as integers (toolgate's float settings take integers too). Tables come after the plain
keys of their parent, arrays of tables (a list of maps: [[auth.issuers]]) last; a null value
leaves the key out (toolgate's default applies).
*/}}
{{- define "toolgate.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "toolgate.toml.isTableArray" -}}
{{- if and (kindIs "slice" .) (gt (len .) 0) }}
{{- $all := true }}
{{- range . }}{{ if not (kindIs "map" .) }}{{ $all = false }}{{ end }}{{ end }}
{{- if $all }}true{{ end }}
{{- end }}
{{- end }}

{{- define "toolgate.toml.value" -}}
{{- $k := kindOf . }}
{{- if eq $k "string" }}{{ toJson . }}
{{- else if eq $k "bool" }}{{ . }}
{{- else if or (eq $k "float64") (eq $k "float32") }}
{{- if eq (float64 (int64 .)) (float64 .) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if or (hasPrefix "int" $k) (hasPrefix "uint" $k) }}{{ . }}
{{- else if eq $k "slice" }}[{{ range $i, $v := . }}{{ if $i }}, {{ end }}{{ include "toolgate.toml.value" $v }}{{ end }}]
{{- else if eq $k "map" }}{ {{- range $i, $kk := keys . | sortAlpha }}{{ if $i }},{{ end }} {{ include "toolgate.toml.key" $kk }} = {{ include "toolgate.toml.value" (get $ $kk) }}{{ end }} }
{{- else }}{{ fail (printf "settings: %v (%s) cannot be written as TOML" . $k) }}
{{- end }}
{{- end }}

{{- define "toolgate.toml.table" -}}
{{- $path := .path }}
{{- $t := .table }}
{{- range $k, $v := $t }}
{{- if not (or (kindIs "invalid" $v) (kindIs "map" $v) (include "toolgate.toml.isTableArray" $v)) }}
{{ include "toolgate.toml.key" $k }} = {{ include "toolgate.toml.value" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := $t }}
{{- if kindIs "map" $v }}
{{- $p := append $path (include "toolgate.toml.key" $k) }}

[{{ join "." $p }}]
{{- include "toolgate.toml.table" (dict "path" $p "table" $v) }}
{{- end }}
{{- end }}
{{- range $k, $v := $t }}
{{- if include "toolgate.toml.isTableArray" $v }}
{{- $p := append $path (include "toolgate.toml.key" $k) }}
{{- range $v }}

[[{{ join "." $p }}]]
{{- include "toolgate.toml.table" (dict "path" $p "table" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolgate.settingsToml" -}}
# toolgate settings, written by the toolgate Helm chart from the `settings` value (every key:
# deploy/config/toolgate.example.toml). The chart sets the listeners, the data and CSV
# directories, the tools path and audit.replica_id through the environment, which overrides this
# file; secrets come from the Secret the same way. Read at start: `helm upgrade` rolls the pods.
{{- include "toolgate.toml.table" (dict "path" (list) "table" .Values.settings) }}
{{- end }}

{{/*
Checks that stop a render with a message naming what to set, for combinations that would
deploy something broken or unsafe.
*/}}
{{- define "toolgate.validate" -}}
{{- $s := .Values.settings }}
{{- $mode := dig "auth" "mode" "dev" $s }}
{{- $multi := include "toolgate.multiReplica" . }}
{{- $replicas := ternary (printf "autoscaling.enabled=true (up to %v replicas)" .Values.autoscaling.maxReplicas) (printf "replicaCount=%v" .Values.replicaCount) .Values.autoscaling.enabled }}
{{- if not (has .Values.database (list "sqlite" "postgres")) }}
{{- fail (printf "toolgate: database=%q: use \"sqlite\" (one replica) or \"postgres\" (any number of replicas)" .Values.database) }}
{{- end }}
{{- if and $multi (eq .Values.database "sqlite") }}
{{- fail (printf "toolgate: %s with database=sqlite: every replica would have its own SQLite file, so its own audit log, tool definitions and sessions. Set database=postgres with a Secret holding TOOLGATE__STORAGE__URL, TOOLGATE__SERVER__STATE_SECRET and TOOLGATE__SESSIONS__SECRET (secret.existingSecret), and settings.limits.backend=redis with TOOLGATE__LIMITS__REDIS__URL (deploy/helm/examples/multi-replica.yaml); or set replicaCount=1 and autoscaling.enabled=false" $replicas) }}
{{- end }}
{{- if and .Values.secret.create .Values.secret.existingSecret }}
{{- fail "toolgate: set either secret.existingSecret (a Secret you made) or secret.create=true (the chart makes one from secret.values), not both" }}
{{- end }}
{{- $keys := keys (.Values.secret.values | default dict) }}
{{- if eq .Values.database "postgres" }}
{{- if not (include "toolgate.secretName" .) }}
{{- fail "toolgate: database=postgres needs the database URL as TOOLGATE__STORAGE__URL in a Secret: set secret.existingSecret to its name (kubectl create secret generic ... --from-literal=TOOLGATE__STORAGE__URL=postgres://...), or secret.create=true with secret.values.TOOLGATE__STORAGE__URL" }}
{{- end }}
{{- if .Values.secret.create }}
{{- $need := list "TOOLGATE__STORAGE__URL" }}
{{- if $multi }}{{ $need = concat $need (list "TOOLGATE__SERVER__STATE_SECRET" "TOOLGATE__SESSIONS__SECRET") }}{{ end }}
{{- if eq (include "toolgate.limitsBackend" .) "redis" }}{{ $need = append $need "TOOLGATE__LIMITS__REDIS__URL" }}{{ end }}
{{- range $need }}
{{- if not (get ($.Values.secret.values | default dict) .) }}
{{- fail (printf "toolgate: secret.values.%s is empty; database=postgres%s needs it (deploy/helm/README.md, \"Several replicas\")" . (ternary " with several replicas" "" (eq $multi "true"))) }}
{{- end }}
{{- end }}
{{- end }}
{{- else if has "TOOLGATE__STORAGE__URL" $keys }}
{{- fail "toolgate: secret.values.TOOLGATE__STORAGE__URL is set but database=sqlite: set database=postgres to use that database" }}
{{- end }}
{{- if and (eq (include "toolgate.limitsBackend" .) "redis") (eq .Values.database "sqlite") }}
{{- fail "toolgate: settings.limits.backend=redis shares quotas between replicas, which database=sqlite (one replica) does not have: remove it, or set database=postgres" }}
{{- end }}
{{- if ne $mode "jwt" }}
{{- fail (printf "toolgate: settings.auth.mode=%q: the chart serves on the pod network, where only \"jwt\" is safe (\"dev\" refuses non-loopback listeners, \"off\" serves everyone and forces the admin API onto loopback). Set settings.auth.mode=jwt with settings.auth.resource and settings.auth.issuers (deploy/auth/ has a guide per identity provider)" $mode) }}
{{- end }}
{{- if not (dig "auth" "resource" "" $s) }}
{{- fail "toolgate: settings.auth.resource is required: the public URL of the MCP endpoint exactly as clients use it, e.g. https://mcp.example.com/mcp" }}
{{- end }}
{{- if not (or (dig "auth" "issuers" list $s) (dig "auth" "introspection" dict $s)) }}
{{- fail "toolgate: settings.auth.issuers (a list of {issuer, jwks_uri}) or settings.auth.introspection is required with auth.mode=jwt" }}
{{- end }}
{{- /* what the chart sets itself (the probes, Service, NetworkPolicy and mounts depend on it) */}}
{{- $owned := dict "server" (list "bind") "admin" (list "bind") "storage" (list "data_dir") "tools" (list "csv_dir" "path") "audit" (list "replica_id") }}
{{- range $section, $names := $owned }}
{{- range $names }}
{{- if hasKey (get $s $section | default dict) . }}
{{- fail (printf "toolgate: settings.%s.%s is set by the chart (through the environment, which would override it); remove it. Ports: service.port / service.adminPort; tools: the tools value" $section .) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.settingsAsSecret }}
{{- $secretish := dict "server" (list "state_secret") "sessions" (list "secret") }}
{{- range $section, $names := $secretish }}
{{- range $names }}
{{- if get (get $s $section | default dict) . }}
{{- fail (printf "toolgate: settings.%s.%s is a secret, and settings go into a ConfigMap: put it in the Secret as TOOLGATE__%s__%s (secret.existingSecret or secret.values), or set settingsAsSecret=true" $section . (upper $section) (upper .)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if dig "auth" "introspection" "client_secret" "" $s }}
{{- fail "toolgate: settings.auth.introspection.client_secret is a secret and has no environment form: set settingsAsSecret=true so that the settings file is a Secret" }}
{{- end }}
{{- range (dig "auth" "issuers" list $s) }}
{{- if get . "hmac_secret" }}
{{- fail "toolgate: settings.auth.issuers[].hmac_secret is a secret and has no environment form: set settingsAsSecret=true so that the settings file is a Secret" }}
{{- end }}
{{- end }}
{{- $urls := dict "storage.url" (dig "storage" "url" "" $s) "limits.redis.url" (dig "limits" "redis" "url" "" $s) }}
{{- $envs := dict "storage.url" "TOOLGATE__STORAGE__URL" "limits.redis.url" "TOOLGATE__LIMITS__REDIS__URL" }}
{{- range $key, $url := $urls }}
{{- if and $url (contains "@" (toString $url)) }}
{{- fail (printf "toolgate: settings.%s carries credentials, and settings go into a ConfigMap: put the URL in the Secret as %s, or set settingsAsSecret=true" $key (get $envs $key)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $grace := dig "server" "shutdown_grace_secs" 20 $s }}
{{- $pre := .Values.preStopSleepSeconds | default 0 }}
{{- if le (int .Values.terminationGracePeriodSeconds) (add (int $grace) (int $pre) 10) }}
{{- fail (printf "toolgate: terminationGracePeriodSeconds=%v must exceed preStopSleepSeconds (%v) + settings.server.shutdown_grace_secs (%v) + 10 s of audit flush, or the kubelet kills toolgate mid-drain" .Values.terminationGracePeriodSeconds $pre $grace) }}
{{- end }}
{{- if .Values.ingress.enabled }}
{{- $hosts := dig "server" "allowed_hosts" (list "localhost" "127.0.0.1" "[::1]") $s }}
{{- if not (or (has "*" $hosts) (has .Values.ingress.host $hosts)) }}
{{- fail (printf "toolgate: ingress.host %q is not in settings.server.allowed_hosts %v: toolgate answers 403 to any other Host header. Add it" .Values.ingress.host $hosts) }}
{{- end }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not (dig "admin" "enabled" true $s)) }}
{{- fail "toolgate: serviceMonitor.enabled=true but settings.admin.enabled=false: /metrics is served by the admin listener" }}
{{- end }}
{{- end }}

{{/*
Final values, as istiod's chart computes them: the defaults (kept under
`_internal_defaults_do_not_set`), then the selected profile, then the user's values, then the older
`pilot:` layout. Every template includes this first; the first one does the work and replaces
`.Values` for all the others (Helm shares one values map across templates).
*/}}
{{- define "rudder.init" -}}
{{- if hasKey .Values "_internal_defaults_do_not_set" -}}
{{- $defaults := deepCopy (get .Values "_internal_defaults_do_not_set") -}}
{{- $_ := unset .Values "_internal_defaults_do_not_set" -}}
{{- $user := deepCopy .Values -}}
{{- $profile := dict -}}
{{- with (coalesce .Values.profile (.Values.global).profile) -}}
{{- with $.Files.Get (printf "files/profile-%s.yaml" .) -}}
{{- $profile = fromYaml . -}}
{{- else -}}
{{- fail (printf "profile %q is not one Rudder knows (known: default, ambient, remote)" .) -}}
{{- end -}}
{{- end -}}
{{- $merged := mustMergeOverwrite (dict) (deepCopy $defaults) $profile $user -}}
{{- with $merged.pilot -}}
{{- $merged = mustMergeOverwrite $merged (deepCopy .) -}}
{{- end -}}
{{- $_ := set $merged "_defaults" $defaults -}}
{{- $_ := set . "Values" $merged -}}
{{- end -}}
{{- end -}}

{{/* The revision's name, "default" when unset. */}}
{{- define "rudder.revision" -}}
{{- .Values.revision | default "default" -}}
{{- end -}}

{{/* `-<revision>` for a non-default revision, as istiod suffixes its object names. */}}
{{- define "rudder.suffix" -}}
{{- if and .Values.revision (ne .Values.revision "default") -}}-{{ .Values.revision }}{{- end -}}
{{- end -}}

{{/* Name of the Deployment, Service and ServiceAccount: istiod's, so tooling and runbooks find them. */}}
{{- define "rudder.fullname" -}}
istiod{{ include "rudder.suffix" . }}
{{- end -}}

{{/* Whether this release renders namespaced ("namespace") or cluster-wide ("cluster") objects. */}}
{{- define "rudder.scope" -}}
{{- $scope := .Values.global.resourceScope -}}
{{- if or (eq $scope "all") (eq $scope .kind) -}}true{{- end -}}
{{- end -}}

{{- /* Whether the control plane runs in this cluster: not a remote install (`istiodRemote`, the
`remote` profile), unless a local injector is asked for. */ -}}
{{- define "rudder.local" -}}
{{- if or (not .Values.istiodRemote.enabled) .Values.istiodRemote.enabledLocalInjectorIstiod -}}true{{- end -}}
{{- end -}}

{{- /* Whether the control plane's own identity and rights are installed here: a local control
plane, or a remote cluster that is also the config cluster (`global.configCluster`). */ -}}
{{- define "rudder.controlPlaneRBAC" -}}
{{- if or (include "rudder.local" .) .Values.global.configCluster -}}true{{- end -}}
{{- end -}}

{{- define "rudder.labels" -}}
app: istiod
istio: pilot
istio.io/rev: {{ include "rudder.revision" . | quote }}
install.operator.istio.io/owning-resource: {{ .Values.ownerName | default "unknown" }}
operator.istio.io/component: Pilot
release: {{ .Release.Name }}
app.kubernetes.io/name: rudder
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: istio
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rudder.selectorLabels" -}}
app: istiod
istio.io/rev: {{ include "rudder.revision" . | quote }}
{{- end -}}

{{- /*
Rudder's image: `image` when it is a whole reference (with a registry path) that is not istiod's
own (`.../pilot`); otherwise Rudder's default. Its tag is the reference's, else the chart's
appVersion. `hub`, `tag` and `variant` are istiod's (they name the pilot image and, under
`global`, the proxies'), so an istiod values file never turns Rudder's image into `pilot:<tag>`.
*/ -}}
{{- define "rudder.image" -}}
{{- $image := .Values.image | default "" -}}
{{- $repo := first (splitList "@" (regexReplaceAll ":[^/]*$" $image "")) -}}
{{- if or (not (contains "/" $image)) (hasSuffix "/pilot" $repo) -}}
{{- $image = "ghcr.io/rudder-mesh/rudder" -}}
{{- end -}}
{{- if or (contains ":" (last (splitList "/" $image))) (contains "@" $image) -}}{{ $image }}{{- else -}}{{ $image }}:{{ .Chart.AppVersion }}{{- end -}}
{{- end -}}

{{/*
Values istiod's chart has and Rudder accepts but does not act on, as dotted paths: each one whose
value differs from its default is named after every install (NOTES.txt) instead of being dropped
without a word.
*/}}
{{- define "rudder.unhonouredPaths" -}}
variant traceSampling cni.enabled cni.provider taint.enabled taint.namespace taint.name jwksResolverExtraRootCA sidecarInjectorWebhook.templates sidecarInjectorWebhook.defaultTemplates telemetry experimental.stableValidationPolicy global.nativeNftables global.mountMtlsCerts global.pilotCertProvider global.sts.servicePort global.caName global.waypoint global.istioNamespace global.sds.token.aud global.proxy.includeOutboundPorts global.proxy.outlierLogPath global.proxy.seccompProfile global.proxy.readinessFailureThreshold global.proxy.readinessInitialDelaySeconds global.proxy.readinessPeriodSeconds global.proxy.startupProbe global.proxy.tracer global.proxy_init.image global.proxy_init.forceApplyIptables base.enableIstioConfigCRDs gateways.securityContext gateways.seccompProfile gatewayClasses
{{- end -}}

{{- define "rudder.unhonoured" -}}
{{- $found := list -}}
{{- range $path := splitList " " (include "rudder.unhonouredPaths" .) -}}
{{- $value := $.Values -}}
{{- $default := $.Values._defaults -}}
{{- range splitList "." $path -}}
{{- $value = get (ternary $value dict (kindIs "map" $value)) . -}}
{{- $default = get (ternary $default dict (kindIs "map" $default)) . -}}
{{- end -}}
{{- if ne (toJson $value) (toJson $default) -}}
{{- $found = append $found $path -}}
{{- end -}}
{{- end -}}
{{- join ", " $found -}}
{{- end -}}

//! Which MeshConfig fields (and `meshNetworks` fields) Rudder does not act on, and what it says
//! of each: the mesh ConfigMap's part of `validation::unhonoured`.

use super::mesh_config::{ECDH_CURVES, MeshConfig};
use super::providers::{ExtensionProvider, is_prometheus_provider};

/// The MeshConfig fields Rudder acts on (`defaultConfig` by the injector). The others are
/// accepted and warned about (`validation::unhonoured`).
pub const HONOURED_MESH_FIELDS: &[&str] = &[
    "trustDomain",
    "serviceSettings",
    "defaultProviders",
    "ingressClass",
    "ingressService",
    "ingressSelector",
    "ingressControllerMode",
    "discoverySelectors",
    "extensionProviders",
    "pathNormalization",
    "outboundTrafficPolicy",
    "defaultConfig",
    "localityLbSetting",
    "enableAutoMtls",
    "protocolDetectionTimeout",
    "defaultServiceExportTo",
    "defaultVirtualServiceExportTo",
    "defaultDestinationRuleExportTo",
    "trustDomainAliases",
    "accessLogFile",
    "accessLogEncoding",
    "accessLogFormat",
    "disableEnvoyListenerLog",
    "enableTracing",
    "connectTimeout",
    "tcpKeepalive",
    "h2UpgradePolicy",
    "tlsDefaults",
    "meshMTLS",
    "inboundTrafficPolicy",
];

/// Of the telemetry providers Rudder applies, the fields it reads; any other is warned about.
const PROVIDER_FIELDS_READ: &[(&str, &[&str])] = &[
    ("envoyFileAccessLog", &["path", "logFormat"]),
    (
        "zipkin",
        &[
            "service",
            "port",
            "maxTagLength",
            "enable64bitTraceId",
            "path",
            "traceContextOption",
            "timeout",
            "headers",
        ],
    ),
    (
        "opentelemetry",
        &[
            "service",
            "port",
            "maxTagLength",
            "http",
            "grpc",
            "resourceDetectors",
            "dynatraceSampler",
        ],
    ),
    ("datadog", &["service", "port", "maxTagLength"]),
    ("skywalking", &["service", "port"]),
    ("envoyOtelAls", &["service", "port", "logName", "logFormat"]),
    (
        "envoyHttpAls",
        &[
            "service",
            "port",
            "logName",
            "filterStateObjectsToLog",
            "additionalRequestHeadersToLog",
            "additionalResponseHeadersToLog",
            "additionalResponseTrailersToLog",
        ],
    ),
    (
        "envoyTcpAls",
        &["service", "port", "logName", "filterStateObjectsToLog"],
    ),
];

/// What Rudder says of a field of an applied provider it does not read.
pub const PROVIDER_FIELD_NOT_APPLIED: &str = "this provider field is not applied";

/// The kinds of `extensionProviders[]` Rudder applies: the external authorizers, file, OpenTelemetry
/// and gRPC access logs, Zipkin and OpenTelemetry tracing. Others are accepted and warned about by name.
const HONOURED_PROVIDER_KINDS: &[&str] = &[
    "envoyExtAuthzHttp",
    "envoyExtAuthzGrpc",
    "envoyFileAccessLog",
    "zipkin",
    "opentelemetry",
    "datadog",
    "skywalking",
    "envoyOtelAls",
    "envoyHttpAls",
    "envoyTcpAls",
    "prometheus",
];

/// What of a `tlsDefaults` or `meshMTLS` value is not sent to the proxies: curves and cipher
/// suites Envoy does not know (istiod passes them on, and Envoy rejects the TLS context), a
/// repeated curve, and `meshMTLS.ecdhCurves`, which istiod refuses.
fn tls_config_warnings(
    field: &str,
    value: &serde_json::Value,
    out: &mut Vec<(String, &'static str)>,
) {
    let list = |key: &str| -> Vec<String> {
        value
            .get(key)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let curves = list("ecdhCurves");
    if field == "meshMTLS" && !curves.is_empty() {
        out.push((
            "data.mesh.meshMTLS.ecdhCurves".into(),
            "not applied: mesh TLS does not support ECDH curves configuration (istiod refuses it)",
        ));
    } else {
        for (i, curve) in curves.iter().enumerate() {
            if !ECDH_CURVES.contains(&curve.as_str()) {
                out.push((
                    format!("data.mesh.{field}.ecdhCurves[{i}]"),
                    "left out: Envoy 1.40 does not accept this ECDH curve (sent, it would reject the TLS context; istiod sends it)",
                ));
            } else if curves[..i].contains(curve) {
                out.push((
                    format!("data.mesh.{field}.ecdhCurves[{i}]"),
                    "a duplicate ECDH curve",
                ));
            }
        }
    }
    let ciphers = list("cipherSuites");
    let kept = crate::config::networking::envoy_cipher_suites(&ciphers);
    for (i, cipher) in ciphers.iter().enumerate() {
        if !kept.contains(cipher) {
            out.push((
                format!("data.mesh.{field}.cipherSuites[{i}]"),
                "left out: not a cipher suite Envoy knows (sent, it would reject the TLS context)",
            ));
        }
    }
}

/// Why a network gateway's `locality` and `weight` are warned about.
const GATEWAY_PLACEMENT: &str = "a network gateway's locality and weight are not used (nor by istiod): endpoints reached through it keep their own locality and weight";

/// The fields of a `meshNetworks` value that are read but change nothing, as (path, note).
pub fn unhonoured_mesh_networks_fields(text: &str) -> Vec<(String, &'static str)> {
    let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Some(networks) = value.get("networks").and_then(|n| n.as_object()) else {
        return out;
    };
    for (name, network) in networks {
        let gateways = network.get("gateways").and_then(|g| g.as_array());
        for (i, gateway) in gateways.into_iter().flatten().enumerate() {
            let set = |field: &str| match gateway.get(field) {
                Some(serde_json::Value::String(s)) => !s.is_empty(),
                Some(serde_json::Value::Number(n)) => n.as_u64() != Some(0),
                Some(serde_json::Value::Null) | None => false,
                Some(_) => true,
            };
            for field in ["locality", "weight"] {
                if set(field) {
                    out.push((
                        format!("meshNetworks.networks.{name}.gateways[{i}].{field}"),
                        GATEWAY_PLACEMENT,
                    ));
                }
            }
        }
    }
    out
}

/// The fields a mesh config sets that Rudder does not act on, as `(field, why)`; values Rudder
/// cannot follow count too (`enableAutoMtls: false`, a protocol detection timeout).
pub fn unhonoured_mesh_fields(text: &str) -> Vec<(String, &'static str)> {
    let Ok(serde_json::Value::Object(fields)) = MeshConfig::parse_value(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, value) in &fields {
        let unset = match value {
            serde_json::Value::Null => true,
            serde_json::Value::Array(a) => a.is_empty(),
            serde_json::Value::Object(o) => o.is_empty(),
            serde_json::Value::String(s) => s.is_empty(),
            _ => false,
        };
        if unset {
            continue;
        }
        let note = match name.as_str() {
            "protocolDetectionTimeout" if !matches!(value.as_str(), Some("0s" | "0" | "0ms")) => {
                Some("protocol detection waits for the client without a deadline")
            }
            "defaultProviders" => {
                // Access logging, tracing and Prometheus metrics are applied; metrics providers
                // of other kinds (istiod's built-in `stackdriver`) are not.
                let providers: Vec<ExtensionProvider> = fields
                    .get("extensionProviders")
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .unwrap_or_default();
                let names = value.get("metrics").and_then(|v| v.as_array());
                for name in names.into_iter().flatten().filter_map(|n| n.as_str()) {
                    if !is_prometheus_provider(&providers, name) {
                        out.push((
                            "data.mesh.defaultProviders.metrics".to_string(),
                            "only Prometheus metrics providers are applied",
                        ));
                        break;
                    }
                }
                None
            }
            // Tracing's sampling, tags and path tag length are applied; the tracer's address
            // is the agent's; proxy metadata goes to the injected proxies. Of `proxyHeaders`,
            // only the metadata-exchange mode is read; the headers keep istiod's defaults.
            "defaultConfig" => {
                let headers = value.get("proxyHeaders").and_then(|h| h.as_object());
                for (field, _) in headers
                    .into_iter()
                    .flatten()
                    .filter(|(f, _)| *f != "metadataExchangeHeaders")
                {
                    out.push((
                        format!("data.mesh.defaultConfig.proxyHeaders.{field}"),
                        "not applied: the proxies keep istiod's default for this header (X-Forwarded-Client-Cert: the caller's certificate appended on sidecar inbound)",
                    ));
                }
                None
            }
            "tlsDefaults" | "meshMTLS" => {
                tls_config_warnings(name, value, &mut out);
                None
            }
            "outboundTrafficPolicy" if value.get("egressProxy").is_some() => {
                Some("no egress proxy: unknown destinations are passed through directly")
            }
            "extensionProviders" => {
                for (i, provider) in value.as_array().into_iter().flatten().enumerate() {
                    let kinds = provider.as_object().into_iter().flatten();
                    for (kind, settings) in kinds.filter(|(k, _)| *k != "name") {
                        if !HONOURED_PROVIDER_KINDS.contains(&kind.as_str()) {
                            out.push((
                                format!("data.mesh.extensionProviders[{i}].{kind}"),
                                PROVIDER_NOT_APPLIED,
                            ));
                            continue;
                        }
                        // Of an applied provider, the settings Rudder does not read.
                        let Some(read) = PROVIDER_FIELDS_READ
                            .iter()
                            .find(|(k, _)| *k == kind)
                            .map(|(_, f)| *f)
                        else {
                            continue;
                        };
                        let fields = settings.as_object().into_iter().flatten();
                        for (field, _) in fields.filter(|(f, _)| !read.contains(&f.as_str())) {
                            out.push((
                                format!("data.mesh.extensionProviders[{i}].{kind}.{field}"),
                                PROVIDER_FIELD_NOT_APPLIED,
                            ));
                        }
                    }
                }
                None
            }
            n if HONOURED_MESH_FIELDS.contains(&n) => None,
            "serviceScopeConfigs" => Some(SERVICE_SCOPE_ONLY_MULTI_NETWORK),
            _ => Some(MESH_FIELD_NOT_APPLIED),
        };
        if let Some(note) = note {
            out.push((format!("data.mesh.{name}"), note));
        }
    }
    out
}

/// What Rudder says of a MeshConfig field it does not act on.
pub const MESH_FIELD_NOT_APPLIED: &str = "this MeshConfig field is not applied";

/// `serviceScopeConfigs` is read by ambient multi-network alone, in istiod as here.
pub const SERVICE_SCOPE_ONLY_MULTI_NETWORK: &str =
    "applied only with AMBIENT_ENABLE_MULTI_NETWORK=true (ambient across networks), as istiod";

/// What Rudder says of an extension provider of a kind it does not apply.
pub const PROVIDER_NOT_APPLIED: &str = "this extension provider kind is not applied";

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus metrics providers (istiod's built-in `prometheus`, or one of that kind) are
    /// applied; a default metrics provider of another kind is warned about.
    #[test]
    fn only_prometheus_metrics_providers_are_applied() {
        let warned = |text: &str| -> Vec<String> {
            unhonoured_mesh_fields(text)
                .into_iter()
                .map(|(f, _)| f)
                .collect()
        };
        assert!(warned("defaultProviders: {metrics: [prometheus]}").is_empty());
        assert!(
            warned("defaultProviders: {metrics: [prom]}\nextensionProviders: [{name: prom, prometheus: {}}]")
                .is_empty()
        );
        assert_eq!(
            warned("defaultProviders: {metrics: [stackdriver]}"),
            ["data.mesh.defaultProviders.metrics"]
        );
        let providers = vec![ExtensionProvider {
            name: "prometheus".into(),
            envoy_file_access_log: Some(Default::default()),
            ..Default::default()
        }];
        assert!(!is_prometheus_provider(&providers, "prometheus"));
    }
}

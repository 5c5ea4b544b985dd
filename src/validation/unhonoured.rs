//! The one list of what Rudder accepts but does not act on yet. Nothing may be silently ignored:
//! every field here produces a warning that names it, wherever config enters (the validation
//! webhook's `warnings`, `rudder validate`, `/debug/sources`) and in the metric
//! `rudder_config_unhonoured_fields{kind,field}`. When a generator starts honouring a field, its
//! entry goes; `tests/library/validation_parity.rs` checks each entry still warns.

use crate::config::{Config, Kind, Spec};
use serde_json::Value;

/// One field (or a whole kind) Rudder does not act on.
#[derive(Debug, Clone, Copy)]
pub struct Unhonoured {
    pub kind: Kind,
    /// A path in the spec (`http[].corsPolicy`: `[]` stands for every element of a list); empty:
    /// the whole object is not acted on. `trafficPolicy.` paths of a DestinationRule apply at every
    /// level a traffic policy can be given (top, port level, subset, subset port level).
    pub path: &'static str,
    /// What the user should know, in a few words.
    pub note: &'static str,
    /// Which VirtualServices it concerns: those sidecars apply, those gateways apply, or any.
    pub applies: Applies,
    /// Only when the field has this value (an enum's name), or starts with it when it ends in
    /// `*` (a reference's scheme, `configmap://*`).
    pub value: Option<&'static str>,
}

/// Where a VirtualService field goes unhonoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    Everywhere,
    /// A VirtualService bound to `mesh` (no gateways, or `mesh` among them).
    Sidecars,
    /// A VirtualService bound to at least one gateway.
    Gateways,
}

const fn field(kind: Kind, path: &'static str, note: &'static str) -> Unhonoured {
    Unhonoured {
        kind,
        path,
        note,
        applies: Applies::Everywhere,
        value: None,
    }
}

const fn on_gateways(kind: Kind, path: &'static str, note: &'static str) -> Unhonoured {
    Unhonoured {
        applies: Applies::Gateways,
        ..field(kind, path, note)
    }
}

/// A field that is not honoured when it has `value`.
const fn when(
    kind: Kind,
    path: &'static str,
    value: &'static str,
    note: &'static str,
) -> Unhonoured {
    Unhonoured {
        value: Some(value),
        ..field(kind, path, note)
    }
}

/// What a policy attached to a Service, ServiceEntry or GatewayClass does under Rudder.
const WAYPOINT_TARGET: &str = "waypoints take only AuthorizationPolicy, RequestAuthentication and Telemetry by targetRefs for now: of this kind, a policy attached to a Service, ServiceEntry or GatewayClass is enforced nowhere";

const fn target_ref(kind: Kind, path: &'static str, target_kind: &'static str) -> Unhonoured {
    Unhonoured {
        kind,
        path,
        note: WAYPOINT_TARGET,
        applies: Applies::Everywhere,
        value: Some(target_kind),
    }
}

/// Every field Rudder accepts and does not honour. Keep it true: a field leaves this list in the
/// change that makes a generator honour it.
pub const UNHONOURED: &[Unhonoured] = &[
    // VirtualService
    on_gateways(
        Kind::VirtualService,
        "tls[].match[].destinationSubnets",
        "TLS routes on gateways match on SNI and port only",
    ),
    on_gateways(
        Kind::VirtualService,
        "tcp[].match[].destinationSubnets",
        "TCP routes on gateways match on port only",
    ),
    field(
        Kind::VirtualService,
        "tcp[].match[].sourceSubnet",
        "TCP routes do not match on the client's address",
    ),
    // DestinationRule
    // Gateway
    field(
        Kind::Gateway,
        "servers[].bind",
        "servers listen on every address",
    ),
    field(
        Kind::Gateway,
        "servers[].defaultEndpoint",
        "not used by gateways",
    ),
    Unhonoured {
        kind: Kind::Gateway,
        path: "servers[].tls.credentialName",
        note: "external SDS (sds://) is not served: the server waits for certificates that never come",
        applies: Applies::Everywhere,
        value: Some("sds://*"),
    },
    Unhonoured {
        kind: Kind::Gateway,
        path: "servers[].tls.credentialNames[]",
        note: "external SDS (sds://) is not served: the server waits for certificates that never come",
        applies: Applies::Everywhere,
        value: Some("sds://*"),
    },
    // ServiceEntry
    Unhonoured {
        kind: Kind::ServiceEntry,
        path: "resolution",
        note: "no dynamic forward proxy: DYNAMIC_DNS hosts are passed through to the address the client resolved, as with NONE",
        applies: Applies::Everywhere,
        value: Some("DYNAMIC_DNS"),
    },
    // Sidecar
    field(
        Kind::Sidecar,
        "ingress[].tls",
        "the ingress listener does not terminate TLS",
    ),
    field(
        Kind::Sidecar,
        "ingress[].bind",
        "ingress listeners take traffic captured for every address",
    ),
    field(
        Kind::Sidecar,
        "ingress[].captureMode",
        "ingress listeners take captured traffic (INTERCEPTION_MODE NONE: no inbound listeners)",
    ),
    field(
        Kind::Sidecar,
        "egress[].bind",
        "egress listeners bind as the interception mode says",
    ),
    field(
        Kind::Sidecar,
        "egress[].captureMode",
        "egress listeners bind as the interception mode says",
    ),
    field(
        Kind::Sidecar,
        "outboundTrafficPolicy.egressProxy",
        "no egress proxy: unknown destinations are passed through directly",
    ),
    // WorkloadGroup, Telemetry.
    field(
        Kind::WorkloadGroup,
        "probe",
        "auto-registration is applied (Kubernetes mode); the health checks a probe asks for are not: the entry stays healthy while its proxy is connected",
    ),
    // EnvoyFilter: patches are applied (xds::generate::passes::envoy_filter), except these.
    when(
        Kind::EnvoyFilter,
        "configPatches[].applyTo",
        "BOOTSTRAP",
        "BOOTSTRAP patches are not applied",
    ),
    field(
        Kind::EnvoyFilter,
        "configPatches[].match.waypoint",
        "the waypoint match (portNumber, filter, route) is not read yet: such a patch applies nowhere",
    ),
    // BackendTLSPolicy: applied (model::gateway_api::backend_tls), but for these.
    field(
        Kind::BackendTLSPolicy,
        "options",
        "implementation-specific TLS options: none is read (nor by istiod)",
    ),
    // istiod 1.30 reads no `filterClass` either: the operation alone places an added filter.
    when(
        Kind::EnvoyFilter,
        "configPatches[].patch.filterClass",
        "AUTHN",
        "filterClass is not acted on (nor by istiod): the patch's operation places the filter",
    ),
    when(
        Kind::EnvoyFilter,
        "configPatches[].patch.filterClass",
        "AUTHZ",
        "filterClass is not acted on (nor by istiod): the patch's operation places the filter",
    ),
    when(
        Kind::EnvoyFilter,
        "configPatches[].patch.filterClass",
        "STATS",
        "filterClass is not acted on (nor by istiod): the patch's operation places the filter",
    ),
    target_ref(Kind::EnvoyFilter, "targetRefs[].kind", "Service"),
    target_ref(Kind::EnvoyFilter, "targetRefs[].kind", "ServiceEntry"),
    // WasmPlugin and Wasm TrafficExtensions: HTTP plugins are served over ECDS
    // (xds::generate::passes::traffic_extension), except these.
    target_ref(Kind::WasmPlugin, "targetRefs[].kind", "Service"),
    target_ref(Kind::WasmPlugin, "targetRefs[].kind", "ServiceEntry"),
    target_ref(Kind::WasmPlugin, "targetRefs[].kind", "GatewayClass"),
    target_ref(Kind::WasmPlugin, "targetRef.kind", "Service"),
    target_ref(Kind::WasmPlugin, "targetRef.kind", "ServiceEntry"),
    target_ref(Kind::WasmPlugin, "targetRef.kind", "GatewayClass"),
    // TrafficExtension: Lua filters are applied (xds::generate::passes::traffic_extension).
    target_ref(Kind::TrafficExtension, "targetRefs[].kind", "Service"),
    target_ref(Kind::TrafficExtension, "targetRefs[].kind", "ServiceEntry"),
    target_ref(Kind::TrafficExtension, "targetRefs[].kind", "GatewayClass"),
    // The Gateway API
    field(
        Kind::GatewayClass,
        "parametersRef",
        "not read, as istiod does not read it: a class's deployment defaults come from a ConfigMap of the system namespace labelled gateway.istio.io/defaults-for-class",
    ),
    field(
        Kind::KubernetesGateway,
        "tls.backend",
        "no client certificate is presented to backends (nor by istiod 1.30)",
    ),
    // As istiod: a frontend validation mode other than the default is not acted on.
    when(
        Kind::KubernetesGateway,
        "tls.frontend.default.validation.mode",
        "AllowInsecureFallback",
        "clients without a valid certificate are refused all the same (nor does istiod fall back)",
    ),
    when(
        Kind::KubernetesGateway,
        "tls.frontend.perPort[].tls.validation.mode",
        "AllowInsecureFallback",
        "clients without a valid certificate are refused all the same (nor does istiod fall back)",
    ),
    field(
        Kind::KubernetesGateway,
        "defaultScope",
        "default Gateways are not served",
    ),
    field(
        Kind::HTTPRoute,
        "rules[].sessionPersistence",
        "sessions are not made sticky",
    ),
    field(
        Kind::GRPCRoute,
        "rules[].sessionPersistence",
        "sessions are not made sticky",
    ),
    field(
        Kind::HTTPRoute,
        "useDefaultGateways",
        "default Gateways are not served",
    ),
    field(
        Kind::GRPCRoute,
        "useDefaultGateways",
        "default Gateways are not served",
    ),
    field(
        Kind::TCPRoute,
        "useDefaultGateways",
        "default Gateways are not served",
    ),
    field(
        Kind::TLSRoute,
        "useDefaultGateways",
        "default Gateways are not served",
    ),
];

/// The unhonoured fields `config` sets, as (field path, note).
pub fn fields(config: &Config) -> Vec<(String, &'static str)> {
    if let Spec::ConfigMap(cm) = &config.spec {
        let data = cm.data.as_ref();
        let mut out = mesh_text(config)
            .map(crate::config::mesh::unhonoured_mesh_fields)
            .unwrap_or_default();
        if let Some(networks) = data.and_then(|d| d.get("meshNetworks")) {
            out.extend(crate::config::mesh::unhonoured_mesh_networks_fields(
                networks,
            ));
        }
        return out;
    }
    let mut out: Vec<(String, &'static str)> = entries(config)
        .into_iter()
        .map(|(path, u)| (path, u.note))
        .collect();
    if let Spec::RequestAuthentication(ra) = &config.spec {
        for (i, rule) in ra.jwt_rules.iter().enumerate() {
            if rule.jwks.is_empty() && rule.jwks_uri.is_empty() {
                out.push((format!("spec.jwtRules[{i}].issuer"), ISSUER_ONLY));
            }
        }
    }
    out
}

/// A jwt rule with only an `issuer`: istiod finds its keys by OIDC discovery, Rudder does not.
pub const ISSUER_ONLY: &str = "no OIDC discovery of the issuer's jwksUri: every token of this issuer is refused (401) until jwksUri or jwks is given";

/// The mesh config a ConfigMap carries (`data.mesh`), when it is one.
fn mesh_text(config: &Config) -> Option<&str> {
    match &config.spec {
        Spec::ConfigMap(cm) => cm
            .data
            .as_ref()
            .and_then(|d| d.get(crate::config::mesh::MESH_KEY))
            .map(String::as_str),
        _ => None,
    }
}

/// The unhonoured fields `config` sets, with the entry of the list each one matched.
pub fn entries(config: &Config) -> Vec<(String, &'static Unhonoured)> {
    let entries: Vec<&Unhonoured> = UNHONOURED
        .iter()
        .filter(|u| u.kind == config.kind)
        .collect();
    if entries.is_empty() {
        return Vec::new();
    }
    let Ok(spec) = serde_json::to_value(&config.spec) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for u in entries {
        if u.path.is_empty() {
            out.push((String::new(), u));
            continue;
        }
        let skip = match u.applies {
            Applies::Everywhere => false,
            Applies::Sidecars => !applies_to_sidecars(config),
            Applies::Gateways => !applies_to_gateways(config),
        };
        if skip {
            continue;
        }
        for path in expand(config.kind, u.path) {
            let mut found = Vec::new();
            find(&spec, &path, u.value, "spec".to_string(), &mut found);
            out.extend(found.into_iter().map(|p| (p, u)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// A VirtualService with no gateways, or with `mesh` among them.
fn applies_to_sidecars(config: &Config) -> bool {
    match &config.spec {
        Spec::VirtualService(vs) => {
            vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh")
        }
        _ => true,
    }
}

/// A VirtualService bound to at least one gateway other than `mesh`.
fn applies_to_gateways(config: &Config) -> bool {
    match &config.spec {
        Spec::VirtualService(vs) => vs.gateways.iter().any(|g| g != "mesh"),
        _ => true,
    }
}

/// The paths an entry stands for: a DestinationRule traffic-policy field at every level.
fn expand(kind: Kind, path: &str) -> Vec<String> {
    match (kind, path.strip_prefix("trafficPolicy.")) {
        (Kind::DestinationRule, Some(rest)) => vec![
            format!("trafficPolicy.{rest}"),
            format!("trafficPolicy.portLevelSettings[].{rest}"),
            format!("subsets[].trafficPolicy.{rest}"),
            format!("subsets[].trafficPolicy.portLevelSettings[].{rest}"),
        ],
        _ => vec![path.to_string()],
    }
}

/// Zero values mean "not set", as in proto3.
fn is_set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        // An enum's `DEFAULT` is what an unset field means.
        Value::String(s) => !s.is_empty() && s != "DEFAULT",
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Appends to `out` the concrete path of every value `pattern` reaches in `v` that is set (to
/// `value`, when given).
fn find(v: &Value, pattern: &str, value: Option<&str>, at: String, out: &mut Vec<String>) {
    let (segment, rest) = match pattern.split_once('.') {
        Some((s, r)) => (s, Some(r)),
        None => (pattern, None),
    };
    let (name, each) = match segment.strip_suffix("[]") {
        Some(n) => (n, true),
        None => (segment, false),
    };
    let Some(child) = v.get(name) else {
        return;
    };
    let here = format!("{at}.{name}");
    if !each {
        match rest {
            Some(r) => find(child, r, value, here, out),
            None => {
                let set = match value {
                    Some(want) => value_matches(child, want),
                    None => is_set(child),
                };
                if set {
                    out.push(here);
                }
            }
        }
        return;
    }
    let Some(items) = child.as_array() else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let here = format!("{here}[{i}]");
        match rest {
            Some(r) => find(item, r, value, here, out),
            None if value.is_some_and(|want| !value_matches(item, want)) => {}
            None => out.push(here),
        }
    }
}

/// Whether a field's value is `want`, or starts with it without its trailing `*`.
fn value_matches(v: &Value, want: &str) -> bool {
    if let Value::Bool(b) = v {
        return b.to_string() == want;
    }
    let Some(v) = v.as_str() else {
        return false;
    };
    match want.strip_suffix('*') {
        Some(prefix) => v.starts_with(prefix),
        None => v == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        let parsed = crate::config::parse_yaml(yaml, "default");
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        parsed.configs.into_iter().next().expect("one object")
    }

    #[test]
    fn mesh_config_fields_rudder_does_not_apply_are_named() {
        let cm = config(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    trustDomain: example.org\n    enableAutoMtls: false\n    protocolDetectionTimeout: 5s\n    dnsRefreshRate: 10s\n    outboundTrafficPolicy: {mode: ALLOW_ANY}\n",
        );
        let names: Vec<String> = fields(&cm).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            names,
            [
                "data.mesh.dnsRefreshRate",
                "data.mesh.protocolDetectionTimeout"
            ]
        );
    }

    #[test]
    fn honoured_mesh_fields_are_not_warned_and_other_extension_providers_are() {
        let cm = config(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    trustDomainAliases: [old.example]\n    extensionProviders:\n    - name: authz\n      envoyExtAuthzGrpc: {service: authz.ns.svc.cluster.local, port: 9000}\n    - name: otel\n      opentelemetry: {service: otel.ns.svc.cluster.local, port: 4317}\n    - name: ls\n      lightstep: {service: ls.ns.svc.cluster.local, port: 8080}\n    - name: z\n      opentelemetry: {service: z.ns.svc.cluster.local, port: 4317, serviceAttributeEnrichment: OTEL_SEMANTIC_CONVENTIONS}\n",
        );
        assert_eq!(
            fields(&cm),
            [
                (
                    "data.mesh.extensionProviders[2].lightstep".to_string(),
                    crate::config::mesh::PROVIDER_NOT_APPLIED
                ),
                (
                    "data.mesh.extensionProviders[3].opentelemetry.serviceAttributeEnrichment"
                        .to_string(),
                    crate::config::mesh::PROVIDER_FIELD_NOT_APPLIED
                )
            ]
        );
    }

    #[test]
    fn finds_set_fields_at_every_level_and_ignores_unset_ones() {
        let gw = config(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g, namespace: ns}\nspec:\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [a.example.com]\n    tls: {mode: SIMPLE, credentialName: \"sds://c\", minProtocolVersion: TLSV1_3}\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [b.example.com]\n    tls: {mode: SIMPLE, credentialName: \"kubernetes://c\"}\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [a.example.com]\n",
        );
        assert_eq!(
            fields(&gw),
            [(
                "spec.servers[0].tls.credentialName".to_string(),
                "external SDS (sds://) is not served: the server waits for certificates that never come"
            )]
        );
        let vs = config(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, namespace: ns}\nspec:\n  hosts: [a]\n  gateways: [gw]\n  tcp: [{route: [{destination: {host: a}}]}]\n",
        );
        assert!(
            fields(&vs).is_empty(),
            "TCP routes on a gateway are applied"
        );
    }
}

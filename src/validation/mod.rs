//! Istio's validation rules, with Istio's messages, for every kind of the config model.
//!
//! `validate` returns every problem found (not just the first) so a person can fix a file in one pass.
//! Each error names the object, the field path and the reason.

pub mod cel;
mod extensions;
mod gateway_api;
mod helpers;
mod networking;
mod report;
mod security;
pub mod unhonoured;

pub use report::{Report, Verdict, Warning};

pub use helpers::*;

use crate::config::{Config, ConfigError, Family, Spec};

/// Validates one object as Istio's validation webhook would; errors only.
pub fn validate(config: &Config) -> Result<(), Vec<ConfigError>> {
    let verdict = check(config);
    if verdict.errors.is_empty() {
        Ok(())
    } else {
        Err(verdict.errors)
    }
}

/// Validates one object as Istio's validation webhook would: its errors, istiod's warnings, and a
/// warning for every field Rudder accepts but does not honour yet.
pub fn check(config: &Config) -> Verdict {
    let object = config.object_ref();
    let mut r = Report::new(&object);
    let meta = &config.metadata;
    match config.kind.info().family {
        // The API server has validated Kubernetes objects already; of the mesh ConfigMap, the
        // MeshConfig fields Rudder does not act on are warned about (below).
        Family::Kubernetes => {}
        Family::GatewayApi => {
            r.check("metadata.name", helpers::dns1123_subdomain(&meta.name));
            if !config.kind.cluster_scoped() {
                r.check(
                    "metadata.namespace",
                    helpers::dns1123_label(&meta.namespace),
                );
            }
        }
        Family::Istio => {
            metadata(&mut r, config);
            r.check("metadata.name", helpers::dns1123_subdomain(&meta.name));
            r.check(
                "metadata.namespace",
                helpers::dns1123_label(&meta.namespace),
            );
        }
    }
    spec(&mut r, config);
    for (field, note) in unhonoured::fields(config) {
        r.warn(
            field,
            format!("accepted but not honoured by Rudder yet: {note}"),
        );
    }
    r.into_verdict()
}

/// The rules of the object's kind, each kind named (a new kind does not compile until it says
/// what its rules are).
fn spec(r: &mut Report, config: &Config) {
    let meta = &config.metadata;
    let ns = meta.namespace.as_str();
    match &config.spec {
        Spec::VirtualService(s) => networking::virtual_service(r, ns, s),
        Spec::DestinationRule(s) => networking::destination_rule(r, ns, s),
        Spec::Gateway(s) => networking::gateway(r, &meta.name, s),
        Spec::ServiceEntry(s) => networking::service_entry(r, ns, &meta.labels, s),
        Spec::Sidecar(s) => networking::sidecar(r, ns, s),
        Spec::WorkloadEntry(s) => networking::workload_entry(r, "spec", s, false),
        Spec::WorkloadGroup(s) => networking::workload_group(r, s),
        Spec::EnvoyFilter(s) => networking::envoy_filter(r, s),
        Spec::PeerAuthentication(s) => security::peer_authentication(r, s),
        Spec::AuthorizationPolicy(s) => security::authorization_policy(r, s),
        Spec::RequestAuthentication(s) => security::request_authentication(r, s),
        Spec::Telemetry(s) => extensions::telemetry(r, s),
        Spec::WasmPlugin(s) => extensions::wasm_plugin(r, s),
        Spec::TrafficExtension(s) => extensions::traffic_extension(r, s),
        Spec::ProxyConfig(s) => extensions::proxy_config(r, s),
        Spec::GatewayClass(s) => gateway_api::gateway_class(r, s),
        Spec::KubernetesGateway(s) => gateway_api::gateway(r, s),
        Spec::HTTPRoute(s) => gateway_api::http_route(r, s),
        Spec::GRPCRoute(s) => gateway_api::grpc_route(r, s),
        Spec::TCPRoute(s) => gateway_api::l4_route(r, &s.parent_refs, &s.rules),
        Spec::TLSRoute(s) => gateway_api::tls_route(r, s),
        Spec::ReferenceGrant(s) => gateway_api::reference_grant(r, s),
        Spec::BackendTLSPolicy(s) => gateway_api::backend_tls_policy(r, s),
        Spec::ListenerSet(s) => gateway_api::listener_set(r, s),
        Spec::Service(_)
        | Spec::EndpointSlice(_)
        | Spec::Pod(_)
        | Spec::Namespace(_)
        | Spec::Secret(_)
        | Spec::Node(_)
        | Spec::ConfigMap(_)
        | Spec::Ingress(_)
        | Spec::IngressClass(_) => {}
    }
}

/// The annotations istiod judges on every kind.
fn metadata(r: &mut Report, config: &Config) {
    let annotations = &config.metadata.annotations;
    let (ns, name) = (&config.metadata.namespace, &config.metadata.name);
    if let Some(value) = annotations.get(DRY_RUN) {
        match &config.spec {
            Spec::AuthorizationPolicy(ap) => match ap.action {
                crate::config::security::AuthorizationAction::ALLOW
                | crate::config::security::AuthorizationAction::DENY => {
                    if parse_go_bool(value).is_none() {
                        r.error(
                            format!("metadata.annotations.{DRY_RUN}"),
                            format!("{ns}/{name} has annotation {DRY_RUN} with invalid value ({value}): strconv.ParseBool: parsing {value:?}: invalid syntax"),
                        );
                    }
                }
                action => r.error(
                    format!("metadata.annotations.{DRY_RUN}"),
                    format!("the annotation {DRY_RUN} currently only supports action ALLOW/DENY, found action {action:?} in {ns}/{name}"),
                ),
            },
            _ => r.error(
                format!("metadata.annotations.{DRY_RUN}"),
                format!("{ns}/{name} has unsupported annotation {DRY_RUN}, please remove the annotation"),
            ),
        }
    }
    if annotations.contains_key(ALWAYS_REJECT) {
        r.error(
            format!("metadata.annotations.{ALWAYS_REJECT}"),
            format!("{ALWAYS_REJECT:?} annotation found, rejecting"),
        );
    }
    for internal in [PARENT_NAMESPACE, PARENTS] {
        if annotations.contains_key(internal) {
            r.error(
                format!("metadata.annotations.{internal}"),
                format!("{internal:?} annotation found, this may not be set by users"),
            );
        }
    }
}

use crate::config::internal_annotations::{PARENT_NAMESPACE, PARENTS};
pub use crate::config::security::DRY_RUN;
use crate::config::security::parse_go_bool;
/// istiod's test hook: an object carrying it is always denied by the webhook.
pub const ALWAYS_REJECT: &str = "internal.istio.io/webhook-always-reject";

#[cfg(test)]
mod tests {
    use super::*;

    /// What the checks say of the one object of `yaml`.
    fn report(yaml: &str) -> Verdict {
        let parsed = crate::config::parse_yaml(yaml, "default");
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let config = parsed.configs.into_iter().next().expect("one object");
        check(&config)
    }

    fn warnings(yaml: &str) -> Vec<String> {
        report(yaml)
            .warnings
            .iter()
            .map(|w| w.message.clone())
            .collect()
    }

    /// istiod warns about several hosts on one address with a port of a TCP protocol, which
    /// counts TLS and HTTPS (a listener per address cannot tell the hosts apart) and not an
    /// unset protocol.
    #[test]
    fn several_hosts_on_one_address_warn_for_tcp_tls_and_https_ports_only() {
        let se = |protocol: &str| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: s, namespace: ns}}\nspec: {{hosts: [a.example.com, b.example.com], addresses: [10.0.0.1], ports: [{{number: 443, name: p{protocol}}}], resolution: DNS}}\n"
            )
        };
        let warned = |protocol: &str| {
            let with = if protocol.is_empty() {
                String::new()
            } else {
                format!(", protocol: {protocol}")
            };
            warnings(&se(&with))
                .iter()
                .any(|w| w.contains("more than one host specified simultaneously"))
        };
        assert!(warned("HTTPS"));
        assert!(warned("TLS"));
        assert!(warned("TCP"));
        assert!(!warned(""), "an unset protocol is not TCP to istiod");
        assert!(!warned("HTTP"));
    }

    fn errors(yaml: &str) -> Vec<String> {
        report(yaml).errors.iter().map(|e| e.to_string()).collect()
    }

    /// Istio's own examples that istiod admits, refused before: an EnvoyFilter value wrapped in
    /// `udpa.type.v1.TypedStruct` (Istio's local rate-limit sample), a VirtualService's removed
    /// `websocketUpgrade` (admitted with a warning, as istiod ignores it), and a gateway's
    /// VirtualService naming an AUTO_PASSTHROUGH SNI (`outbound_.<port>_._.<host>`) as a host.
    #[test]
    fn istios_own_examples_are_admitted() {
        let rate_limit = "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: rl, namespace: istio-system}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_INBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}\n    patch:\n      operation: INSERT_BEFORE\n      value:\n        name: envoy.filters.http.local_ratelimit\n        typed_config:\n          \"@type\": type.googleapis.com/udpa.type.v1.TypedStruct\n          type_url: type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n          value: {stat_prefix: http_local_rate_limiter, token_bucket: {max_tokens: 4, tokens_per_fill: 4, fill_interval: 60s}}\n";
        assert_eq!(errors(rate_limit), Vec::<String>::new());

        let websocket = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ws, namespace: default}\nspec:\n  hosts: [ws]\n  http: [{websocketUpgrade: true, route: [{destination: {host: ws}}]}]\n";
        assert_eq!(errors(websocket), Vec::<String>::new());
        assert!(
            warnings(websocket)
                .iter()
                .any(|w| w.contains("websocketUpgrade was removed"))
        );

        let sni = |gateways: &str| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: p, namespace: istio-system}}\nspec:\n  hosts: [\"outbound_.15010_._.istiod.istio-system.svc.cluster.local\"]\n  gateways: [{gateways}]\n  tls:\n  - match: [{{port: 15010, sniHosts: [\"outbound_.15010_._.istiod.istio-system.svc.cluster.local\"]}}]\n    route: [{{destination: {{host: istiod.istio-system.svc.cluster.local}}}}]\n"
            )
        };
        assert_eq!(errors(&sni("istiod-gateway")), Vec::<String>::new());
        // For sidecars (the mesh gateway) such a host is still invalid, as in istiod.
        assert!(!errors(&sni("mesh")).is_empty());
    }
}

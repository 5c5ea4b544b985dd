//! BackendTLSPolicy as istiod applies it: TLS origination (`SIMPLE`) to the Service (or
//! ServiceEntry) a policy targets, from every proxy that sends to it (gateways and sidecars), with
//! the policy's `hostname` as SNI, its subject alternative names (the hostname when it gives
//! none: the spec's rule) and its CA: a ConfigMap's `ca.crt` served over SDS as
//! `configmap://<namespace>/<name>`, or the system roots for `wellKnownCACertificates: System`.
//! Each becomes a DestinationRule (port-level with a `sectionName`), placed after the
//! DestinationRules of the store for the same host. A CA reference that is not a ConfigMap of the
//! policy's namespace names a credential that does not exist, so the connection fails rather than
//! trusting more than the policy says.

use super::Translation;
use crate::config::{Config, Kind, ObjectMeta, Spec};
use crate::store::Snapshot;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The SDS resource prefix of a ConfigMap's CA bundle (istiod's `configmap://`).
pub const CONFIGMAP_CREDENTIAL: &str = "configmap://";

/// The key of a ConfigMap holding a CA bundle.
pub const CA_KEY: &str = crate::config::CA_BUNDLE_KEY;

/// The annotation naming the policy a derived DestinationRule comes from.
pub const FROM_POLICY: &str = "internal.istio.io/backend-tls-policy";

/// The PEM CA bundle of ConfigMap `namespace/name` (its `ca.crt`), when it holds one: what SDS
/// serves as `configmap://namespace/name` and what a policy's `ResolvedRefs` needs.
pub fn ca_bundle<'a>(snapshot: &'a Snapshot, namespace: &str, name: &str) -> Option<&'a str> {
    match &snapshot
        .get_named(Kind::ConfigMap, namespace, name)?
        .config
        .spec
    {
        Spec::ConfigMap(cm) => cm
            .data
            .as_ref()?
            .get(CA_KEY)
            .map(String::as_str)
            .filter(|c| c.contains("-----BEGIN CERTIFICATE-----")),
        _ => None,
    }
}

pub(super) fn policies(snapshot: &Snapshot, domain_suffix: &str, out: &mut Translation) {
    let mut policies: Vec<&Arc<Config>> = snapshot
        .list(Kind::BackendTLSPolicy)
        .map(|e| &e.config)
        .collect();
    // The oldest policy wins a target (port) another one also names, as the spec says.
    policies.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    let mut taken: BTreeSet<(String, Option<u32>)> = BTreeSet::new();
    for config in policies {
        let Spec::BackendTLSPolicy(policy) = &config.spec else {
            continue;
        };
        let ns = &config.metadata.namespace;
        let v = &policy.validation;
        let credential = match v.ca_certificate_refs.first() {
            Some(r) if r.group.is_empty() && r.kind == "ConfigMap" => {
                format!("{CONFIGMAP_CREDENTIAL}{ns}/{}", r.name)
            }
            // Not a ConfigMap: nothing serves it, so nothing is trusted (fail closed).
            Some(r) => format!(
                "{CONFIGMAP_CREDENTIAL}{ns}/unsupported-{}-{}",
                r.kind, r.name
            ),
            None => String::new(),
        };
        let mut sans: Vec<String> = v
            .subject_alt_names
            .iter()
            .filter_map(|s| match s.type_.as_str() {
                "Hostname" => s.hostname.clone(),
                "URI" => s.uri.clone(),
                _ => None,
            })
            .collect();
        if sans.is_empty() {
            sans.push(v.hostname.clone());
        }
        let tls = json!({"mode": "SIMPLE", "sni": v.hostname, "subjectAltNames": sans,
                         "credentialName": credential});
        for target in &policy.target_refs {
            let Some((hosts, port)) = target_hosts(snapshot, ns, target, domain_suffix) else {
                continue;
            };
            for host in hosts {
                if !taken.insert((host.clone(), port)) {
                    continue;
                }
                let traffic_policy = match port {
                    Some(p) => json!({"portLevelSettings": [{"port": {"number": p}, "tls": tls}]}),
                    None => json!({"tls": tls}),
                };
                let spec = json!({"host": host, "trafficPolicy": traffic_policy});
                let Ok(dr) = serde_json::from_value(spec) else {
                    continue;
                };
                let mut meta = ObjectMeta {
                    name: format!(
                        "{}~{}~backend-tls{}",
                        config.metadata.name,
                        target.name,
                        port.map(|p| format!("~{p}")).unwrap_or_default()
                    ),
                    namespace: ns.clone(),
                    creation_timestamp: config.metadata.creation_timestamp.clone(),
                    ..Default::default()
                };
                meta.annotations
                    .insert(FROM_POLICY.into(), format!("{ns}/{}", config.metadata.name));
                out.destination_rules.push(Arc::new(Config {
                    api_version: "networking.istio.io/v1".into(),
                    kind: Kind::DestinationRule,
                    metadata: meta,
                    spec: Spec::DestinationRule(dr),
                    status: None,
                }));
            }
        }
    }
}

/// The hostnames a policy target stands for, and the port its `sectionName` names (a Service
/// port's name; `None`: every port). `None` when the target is not a Service or ServiceEntry of
/// the policy's namespace, or names a port it does not have.
fn target_hosts(
    snapshot: &Snapshot,
    ns: &str,
    target: &crate::config::gateway_api::PolicyTargetReference,
    domain_suffix: &str,
) -> Option<(Vec<String>, Option<u32>)> {
    let section = target.section_name.as_deref().filter(|s| !s.is_empty());
    match (target.group.as_str(), target.kind.as_str()) {
        ("", "Service") => {
            let host = format!("{}.{ns}.svc.{domain_suffix}", target.name);
            let port = match section {
                None => None,
                Some(name) => {
                    let entry = snapshot.get_named(Kind::Service, ns, &target.name);
                    let Some(Spec::Service(svc)) = entry.map(|e| &e.config.spec) else {
                        return None;
                    };
                    Some(
                        svc.spec
                            .iter()
                            .flat_map(|s| s.ports.iter().flatten())
                            .find(|p| p.name.as_deref() == Some(name))?
                            .port as u32,
                    )
                }
            };
            Some((vec![host], port))
        }
        ("networking.istio.io", "ServiceEntry") => {
            let entry = snapshot.get_named(Kind::ServiceEntry, ns, &target.name)?;
            let Spec::ServiceEntry(se) = &entry.config.spec else {
                return None;
            };
            let port = match section {
                None => None,
                Some(name) => Some(se.ports.iter().find(|p| p.name == name)?.number),
            };
            let hosts = se
                .hosts
                .iter()
                .map(|h| crate::model::resolve_host(h, ns, domain_suffix))
                .collect();
            Some((hosts, port))
        }
        _ => None,
    }
}

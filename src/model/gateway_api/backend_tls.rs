//! BackendTLSPolicy as istiod applies it: TLS origination (`SIMPLE`) to the Service (or
//! ServiceEntry) a policy targets, from every proxy that sends to it (gateways and sidecars), with
//! the policy's `hostname` as SNI, its subject alternative names (the hostname when it gives
//! none: the spec's rule) and its CA: a ConfigMap's `ca.crt` served over SDS as
//! `configmap://<namespace>/<name>`, or the system roots for `wellKnownCACertificates: System`.
//! The policies of one target's host become one DestinationRule as istiod merges them (the
//! oldest for every port, the oldest for each `sectionName` port), which sorts before the
//! store's DestinationRules for the same host, as istiod's generated rules do. A CA reference that is not a ConfigMap of the
//! policy's namespace names a credential that does not exist, so the connection fails rather than
//! trusting more than the policy says.

use super::outcome::Translation;
use crate::config::{Config, Kind, ObjectMeta, Spec};
use crate::store::Snapshot;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
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

/// One policy's TLS for one host of one target (istiod's `BackendPolicy`).
struct HostPolicy {
    policy: String,
    /// A `sectionName`: the port's name and number; `None` for every port.
    port: Option<(String, u32)>,
    tls: serde_json::Value,
}

pub(super) fn policies(snapshot: &Snapshot, domain_suffix: &str, out: &mut Translation) {
    let mut policies: Vec<&Arc<Config>> = snapshot
        .list(Kind::BackendTLSPolicy)
        .map(|e| &e.config)
        .collect();
    // The oldest policy wins a target (and section) another one also names, as the spec says.
    policies.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    let mut taken: BTreeSet<(String, String, String, String, Option<String>)> = BTreeSet::new();
    // (target kind, namespace, name, host) → the policies for it, oldest first.
    let mut by_target: BTreeMap<(&'static str, String, String, String), Vec<HostPolicy>> =
        BTreeMap::new();
    for config in policies {
        let Spec::BackendTLSPolicy(policy) = &config.spec else {
            continue;
        };
        let ns = &config.metadata.namespace;
        let tls = tls_of(policy, ns);
        for target in &policy.target_refs {
            let Some(Target { kind, hosts, port }) =
                target_hosts(snapshot, ns, target, domain_suffix)
            else {
                continue;
            };
            let section = port.as_ref().map(|(name, _)| name.clone());
            let key = (
                target.group.clone(),
                target.kind.clone(),
                ns.clone(),
                target.name.clone(),
                section,
            );
            if !taken.insert(key) {
                continue;
            }
            for host in hosts {
                by_target
                    .entry((kind, ns.clone(), target.name.clone(), host))
                    .or_default()
                    .push(HostPolicy {
                        policy: format!("{ns}/{}", config.metadata.name),
                        port: port.clone(),
                        tls: tls.clone(),
                    });
            }
        }
    }
    for ((kind, ns, name, host), policies) in by_target {
        out.destination_rules.push(Arc::new(destination_rule(
            kind, &ns, &name, &host, &policies,
        )));
    }
}

/// The client TLS settings a policy asks for (SIMPLE; SNI; SANs; the CA's credential).
fn tls_of(policy: &crate::config::gateway_api::BackendTlsPolicy, ns: &str) -> serde_json::Value {
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
    json!({"mode": "SIMPLE", "sni": v.hostname, "subjectAltNames": sans,
           "credentialName": credential})
}

/// The DestinationRule of one target's host, merged from its policies as istiod merges them
/// (`DestinationRuleCollection`): the oldest policy for every port sets the rule's TLS, the
/// oldest for each named port that port's. Named `<target>~istio-autogenerated-k8s-gateway`
/// (a ServiceEntry's: with the host, dots as dashes) and, as istiod's, without a creation time:
/// it sorts before the user's DestinationRules, so in the target's namespace it is the rule the
/// user's merge into (their subsets are added; their traffic policy is not).
fn destination_rule(
    kind: &str,
    ns: &str,
    name: &str,
    host: &str,
    policies: &[HostPolicy],
) -> Config {
    let mut traffic_policy = serde_json::Map::new();
    let mut ports: Vec<(&str, u32, &serde_json::Value)> = Vec::new();
    for p in policies {
        match &p.port {
            None => {
                traffic_policy.entry("tls").or_insert_with(|| p.tls.clone());
            }
            Some((port_name, number)) => {
                if !ports.iter().any(|(n, _, _)| n == port_name) {
                    ports.push((port_name, *number, &p.tls));
                }
            }
        }
    }
    if !ports.is_empty() {
        let settings: Vec<serde_json::Value> = ports
            .iter()
            .map(|(_, number, tls)| json!({"port": {"number": number}, "tls": tls}))
            .collect();
        traffic_policy.insert("portLevelSettings".into(), settings.into());
    }
    let spec = json!({"host": host, "trafficPolicy": traffic_policy});
    let dr = serde_json::from_value(spec).unwrap_or_default();
    let rule_name = if kind == "ServiceEntry" {
        format!(
            "{name}~{}~{}",
            host.replace('.', "-"),
            super::outcome::INTERNAL_NAME
        )
    } else {
        format!("{name}~{}", super::outcome::INTERNAL_NAME)
    };
    let mut sources: Vec<&str> = policies.iter().map(|p| p.policy.as_str()).collect();
    sources.dedup();
    let mut meta = ObjectMeta {
        name: rule_name,
        namespace: ns.to_string(),
        ..Default::default()
    };
    meta.annotations
        .insert(FROM_POLICY.into(), sources.join(","));
    Config {
        api_version: "networking.istio.io/v1".into(),
        kind: Kind::DestinationRule,
        metadata: meta,
        spec: Spec::DestinationRule(dr),
        status: None,
    }
}

/// A policy target resolved: its kind, the hostnames it stands for, and the port its
/// `sectionName` names (a port's name and number; `None`: every port).
struct Target {
    kind: &'static str,
    hosts: Vec<String>,
    port: Option<(String, u32)>,
}

/// `None` when the target is not a Service or ServiceEntry of the policy's namespace, or names a
/// port it does not have (istiod's `TargetNotFound`).
fn target_hosts(
    snapshot: &Snapshot,
    ns: &str,
    target: &crate::config::gateway_api::PolicyTargetReference,
    domain_suffix: &str,
) -> Option<Target> {
    let section = target.section_name.as_deref().filter(|s| !s.is_empty());
    match (target.group.as_str(), target.kind.as_str()) {
        ("", "Service") => {
            let entry = snapshot.get_named(Kind::Service, ns, &target.name)?;
            let Spec::Service(svc) = &entry.config.spec else {
                return None;
            };
            let host = format!("{}.{ns}.svc.{domain_suffix}", target.name);
            let port = match section {
                None => None,
                Some(name) => Some((
                    name.to_string(),
                    svc.spec
                        .iter()
                        .flat_map(|s| s.ports.iter().flatten())
                        .find(|p| p.name.as_deref() == Some(name))?
                        .port as u32,
                )),
            };
            Some(Target {
                kind: "Service",
                hosts: vec![host],
                port,
            })
        }
        ("networking.istio.io", "ServiceEntry") => {
            let entry = snapshot.get_named(Kind::ServiceEntry, ns, &target.name)?;
            let Spec::ServiceEntry(se) = &entry.config.spec else {
                return None;
            };
            let port = match section {
                None => None,
                Some(name) => Some((
                    name.to_string(),
                    se.ports.iter().find(|p| p.name == name)?.number,
                )),
            };
            let hosts = se
                .hosts
                .iter()
                .map(|h| crate::model::resolve_host(h, ns, domain_suffix))
                .collect();
            Some(Target {
                kind: "ServiceEntry",
                hosts,
                port,
            })
        }
        _ => None,
    }
}

//! The ambient view as JSON in the shape of ztunnel's own `/config_dump` (`workloads`, `services`,
//! `policies`), so what Rudder sends and what a ztunnel holds can be compared field by field; and
//! the network gateways in istiod's `/debug/networkz` shape.

use super::fields::ip_from_bytes;
use super::index::AmbientIndex;
use super::pb::security::string_match::MatchType;
use super::pb::security::{Action, Address, Authorization, Match, Scope, StringMatch};
use super::pb::workload::{
    GatewayAddress, NetworkMode, Service, TunnelProtocol, Workload, WorkloadStatus, WorkloadType,
    gateway_address::Destination,
};
use crate::xds::context::PushContext;
use serde_json::{Map, Value, json};

pub fn config_dump(index: &AmbientIndex) -> Value {
    json!({
        "workloads": index.workloads.values().map(workload).collect::<Vec<_>>(),
        "services": index.services.values().map(|s| service(index, s)).collect::<Vec<_>>(),
        "policies": index.policies.values().map(policy).collect::<Vec<_>>(),
        "stagedServices": {},
    })
}

fn ip_text(bytes: &[u8]) -> String {
    ip_from_bytes(bytes)
        .map(|ip| ip.to_string())
        .unwrap_or_default()
}

fn status(s: i32) -> &'static str {
    if s == WorkloadStatus::Unhealthy as i32 {
        "Unhealthy"
    } else {
        "Healthy"
    }
}

/// ztunnel writes a gateway as `namespace/hostname` or `network/ip`.
fn gateway(g: &GatewayAddress) -> Value {
    let destination = match &g.destination {
        Some(Destination::Hostname(h)) => format!("{}/{}", h.namespace, h.hostname),
        Some(Destination::Address(a)) => format!("{}/{}", a.network, ip_text(&a.address)),
        None => String::new(),
    };
    json!({ "destination": destination, "hboneMtlsPort": g.hbone_mtls_port })
}

/// Inserts `value` unless it is the type's default: ztunnel skips those fields.
fn put(out: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty() || o.values().all(|v| v.as_str() == Some("")),
        Value::Bool(b) => !b,
        Value::Null => true,
        Value::Number(_) => false,
    };
    if !empty {
        out.insert(key.to_string(), value);
    }
}

fn workload(w: &Workload) -> Value {
    let mut out = Map::new();
    out.insert(
        "workloadIps".into(),
        json!(w.addresses.iter().map(|a| ip_text(a)).collect::<Vec<_>>()),
    );
    if let Some(g) = &w.waypoint {
        out.insert("waypoint".into(), gateway(g));
    }
    let protocol = if w.tunnel_protocol == TunnelProtocol::Hbone as i32 {
        "HBONE"
    } else {
        "TCP"
    };
    out.insert("protocol".into(), json!(protocol));
    let mode = if w.network_mode == NetworkMode::HostNetwork as i32 {
        "HostNetwork"
    } else {
        "Standard"
    };
    out.insert("networkMode".into(), json!(mode));
    put(&mut out, "uid", json!(w.uid));
    out.insert("name".into(), json!(w.name));
    out.insert("namespace".into(), json!(w.namespace));
    put(&mut out, "trustDomain", json!(w.trust_domain));
    put(&mut out, "serviceAccount", json!(w.service_account));
    put(&mut out, "network", json!(w.network));
    put(&mut out, "workloadName", json!(w.workload_name));
    let kind = WorkloadType::try_from(w.workload_type)
        .unwrap_or(WorkloadType::Pod)
        .as_str_name()
        .to_lowercase();
    put(&mut out, "workloadType", json!(kind));
    put(&mut out, "canonicalName", json!(w.canonical_name));
    put(&mut out, "canonicalRevision", json!(w.canonical_revision));
    put(&mut out, "node", json!(w.node));
    put(
        &mut out,
        "authorizationPolicies",
        json!(w.authorization_policies),
    );
    out.insert("status".into(), json!(status(w.status)));
    out.insert("clusterId".into(), json!(w.cluster_id));
    if let Some(l) = &w.locality {
        put(
            &mut out,
            "locality",
            json!({"region": l.region, "zone": l.zone, "subzone": l.subzone}),
        );
    }
    let mut services: Vec<&String> = w.services.keys().collect();
    services.sort();
    put(&mut out, "services", json!(services));
    out.insert("capacity".into(), json!(w.capacity.unwrap_or(1)));
    Value::Object(out)
}

fn service(index: &AmbientIndex, s: &Service) -> Value {
    let key = format!("{}/{}", s.namespace, s.hostname);
    let ports: Map<String, Value> = s
        .ports
        .iter()
        .map(|p| (p.service_port.to_string(), json!(p.target_port)))
        .collect();
    let endpoints: Map<String, Value> = index
        .service_workloads
        .get(&key)
        .into_iter()
        .flatten()
        .filter_map(|uid| index.workloads.get(uid).map(|w| (uid, w)))
        .map(|(uid, w)| {
            let port: Map<String, Value> = w
                .services
                .get(&key)
                .map(|l| l.ports.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|p| (p.service_port.to_string(), json!(p.target_port)))
                .collect();
            (
                uid.clone(),
                json!({"workloadUid": uid, "port": port, "status": status(w.status)}),
            )
        })
        .collect();
    let mut out = Map::new();
    out.insert("name".into(), json!(s.name));
    out.insert("namespace".into(), json!(s.namespace));
    out.insert("hostname".into(), json!(s.hostname));
    out.insert(
        "vips".into(),
        json!(
            s.addresses
                .iter()
                .map(|a| format!("{}/{}", a.network, ip_text(&a.address)))
                .collect::<Vec<_>>()
        ),
    );
    out.insert("ports".into(), Value::Object(ports));
    out.insert("endpoints".into(), Value::Object(endpoints));
    out.insert("subjectAltNames".into(), json!(s.subject_alt_names));
    if let Some(g) = &s.waypoint {
        out.insert("waypoint".into(), gateway(g));
    }
    out.insert("canonical".into(), json!(s.canonical));
    out.insert("visibility".into(), json!("Public"));
    Value::Object(out)
}

fn policy(a: &Authorization) -> Value {
    let scope = match Scope::try_from(a.scope).unwrap_or(Scope::Global) {
        Scope::Global => "Global",
        Scope::Namespace => "Namespace",
        Scope::WorkloadSelector => "WorkloadSelector",
    };
    let action = if a.action == Action::Deny as i32 {
        "Deny"
    } else {
        "Allow"
    };
    let rules: Vec<Value> = a
        .rules
        .iter()
        .map(|r| {
            json!(
                r.clauses
                    .iter()
                    .map(|c| c.matches.iter().map(rbac_match).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            )
        })
        .collect();
    json!({
        "name": a.name,
        "namespace": a.namespace,
        "scope": scope,
        "action": action,
        "rules": rules,
        "dryRun": a.dry_run,
    })
}

fn string_matches(v: &[StringMatch]) -> Value {
    json!(
        v.iter()
            .map(|m| match &m.match_type {
                Some(MatchType::Exact(s)) => json!({ "Exact": s }),
                Some(MatchType::Prefix(s)) => json!({ "Prefix": s }),
                Some(MatchType::Suffix(s)) => json!({ "Suffix": s }),
                Some(MatchType::Presence(())) | None => json!({ "Presence": [] }),
            })
            .collect::<Vec<_>>()
    )
}

fn cidrs(v: &[Address]) -> Value {
    json!(
        v.iter()
            .map(|a| format!("{}/{}", ip_text(&a.address), a.length))
            .collect::<Vec<_>>()
    )
}

fn rbac_match(m: &Match) -> Value {
    let sa = |v: &[super::pb::security::ServiceAccountMatch]| {
        json!(
            v.iter()
                .map(|s| json!({"namespace": s.namespace, "serviceAccount": s.service_account}))
                .collect::<Vec<_>>()
        )
    };
    let mut out = Map::new();
    put(&mut out, "namespaces", string_matches(&m.namespaces));
    put(&mut out, "notNamespaces", string_matches(&m.not_namespaces));
    put(&mut out, "serviceAccounts", sa(&m.service_accounts));
    put(&mut out, "notServiceAccounts", sa(&m.not_service_accounts));
    put(&mut out, "principals", string_matches(&m.principals));
    put(&mut out, "notPrincipals", string_matches(&m.not_principals));
    put(&mut out, "sourceIps", cidrs(&m.source_ips));
    put(&mut out, "notSourceIps", cidrs(&m.not_source_ips));
    put(&mut out, "destinationIps", cidrs(&m.destination_ips));
    put(&mut out, "notDestinationIps", cidrs(&m.not_destination_ips));
    put(&mut out, "destinationPorts", json!(m.destination_ports));
    put(
        &mut out,
        "notDestinationPorts",
        json!(m.not_destination_ports),
    );
    Value::Object(out)
}

/// The network gateways of `ctx` as istiod's `/debug/networkz` lists them (its `NetworkGateway`,
/// with Go's field names): the gateways sidecars and gateways reach other networks through
/// (`meshNetworks` addresses and labelled gateway Services, on their mTLS port) and, under
/// ambient multi-network, the east-west gateways ztunnel and waypoints reach them through (on
/// their HBONE port, with the identity they run as). Ordered by network, cluster, address.
pub fn network_gateways(ctx: &PushContext) -> serde_json::Value {
    use serde_json::json;
    let mut out: Vec<(String, String, String, serde_json::Value)> = Vec::new();
    for (network, gateways) in &ctx.mesh.network_gateways {
        for g in gateways {
            out.push((
                network.clone(),
                g.cluster.clone(),
                g.address.clone(),
                json!({"Network": network, "Cluster": g.cluster, "Addr": g.address,
                       "Port": g.port, "HBONEPort": 0,
                       "ServiceAccount": {"Namespace": "", "Name": ""}}),
            ));
        }
    }
    if ctx.mesh.ambient_multi_network {
        let index = super::index(ctx);
        for (network, gateways) in &index.network_gateways {
            for g in gateways {
                let cluster =
                    crate::model::network::resolved(&g.cluster, &ctx.mesh.cluster_id).to_string();
                out.push((
                    network.clone(),
                    cluster.clone(),
                    g.address.clone(),
                    json!({"Network": network, "Cluster": cluster, "Addr": g.address,
                           "Port": 0, "HBONEPort": g.port(),
                           "ServiceAccount": {"Namespace": g.namespace,
                                              "Name": g.service_account}}),
                ));
            }
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    serde_json::Value::Array(out.into_iter().map(|(_, _, _, v)| v).collect())
}

#[cfg(test)]
mod networkz_tests {
    use super::*;

    /// `/debug/networkz` lists every network's gateways in istiod's shape: a `meshNetworks`
    /// address (no cluster) and a labelled gateway Service (its cluster).
    #[test]
    fn networkz_lists_the_network_gateways_in_istiods_shape() {
        let ctx = crate::testing::push_context_with_mesh_config(
            r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: ""
  meshNetworks: |
    networks:
      east: {gateways: [{address: 192.0.2.1, port: 15443}]}
---
apiVersion: v1
kind: Service
metadata: {name: eastwest, namespace: istio-system, labels: {topology.istio.io/network: west}}
spec: {ports: [{port: 15443, name: tls}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.50}]}}
"#,
        );
        assert_eq!(
            network_gateways(&ctx),
            serde_json::json!([
                {"Network": "east", "Cluster": "", "Addr": "192.0.2.1", "Port": 15443,
                 "HBONEPort": 0, "ServiceAccount": {"Namespace": "", "Name": ""}},
                {"Network": "west", "Cluster": "Kubernetes", "Addr": "192.0.2.50", "Port": 15443,
                 "HBONEPort": 0, "ServiceAccount": {"Namespace": "", "Name": ""}},
            ])
        );
        let empty = crate::testing::push_context("");
        assert_eq!(network_gateways(&empty), serde_json::json!([]));
    }
}

//! How a workload's fields are written for ztunnel: addresses as raw bytes, tunnel protocols,
//! localities, waypoints, the labels and names that decide them.

use super::pb::workload::{
    AppProtocol, GatewayAddress, Locality, NamespacedHostname, NetworkAddress, TunnelProtocol,
    gateway_address,
};
use crate::model::mesh::MeshSettings;
use crate::model::{Protocol, Registry};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// On a namespace (or a pod): `ambient` captures its pods; `none` on a pod opts it out.
pub const DATAPLANE_MODE: &str = "istio.io/dataplane-mode";

/// On a pod or namespace: the network its workloads are on.
pub(super) const NETWORK_LABEL: &str = "topology.istio.io/network";

/// The port waypoints accept HBONE on.
pub(super) const HBONE_PORT: u32 = 15008;

/// istiod's name for the DENY-plaintext policy that STRICT workloads reference.
pub const STATIC_STRICT_POLICY: &str = "istio_converted_static_strict";

/// An IP as ztunnel's wire form: 4 or 16 raw bytes.
pub fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// Everything a workload needs from its namespace.
pub(super) struct NamespaceInfo<'a> {
    pub(super) labels: Option<&'a BTreeMap<String, String>>,
}

impl NamespaceInfo<'_> {
    pub(super) fn label(&self, key: &str) -> Option<&str> {
        self.labels.and_then(|l| l.get(key)).map(String::as_str)
    }
}

pub(super) fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(b).ok().map(IpAddr::from),
        _ => None,
    }
}

pub(super) fn non_empty(s: &str, default: &str) -> String {
    if s.is_empty() {
        default.to_string()
    } else {
        s.to_string()
    }
}

/// A workload that terminates HBONE itself (a sidecar with `ENABLE_HBONE`, which the injector
/// labels `networking.istio.io/tunnel: http`): ztunnel sends it HBONE, as istiod tells it.
pub(super) fn native_tunnel(labels: &BTreeMap<String, String>) -> bool {
    labels.get(TUNNEL_LABEL).is_some_and(|t| t == "http")
}

/// The label of a workload that takes HBONE itself.
pub const TUNNEL_LABEL: &str = "networking.istio.io/tunnel";

pub(super) fn tunnel(captured: bool) -> TunnelProtocol {
    if captured {
        TunnelProtocol::Hbone
    } else {
        TunnelProtocol::None
    }
}

/// istiod's rule: a pod is in ambient mode when it or its namespace says `ambient`, unless the pod
/// says `none`, runs on the host network, or already has a sidecar.
pub(super) fn captured(
    labels: &BTreeMap<String, String>,
    annotations: Option<&BTreeMap<String, String>>,
    host_network: bool,
    ns: &NamespaceInfo,
) -> bool {
    if host_network || annotations.is_some_and(|a| a.contains_key("sidecar.istio.io/status")) {
        return false;
    }
    match labels.get(DATAPLANE_MODE).map(String::as_str) {
        Some("none") => false,
        Some("ambient") => true,
        _ => ns.label(DATAPLANE_MODE) == Some("ambient"),
    }
}

/// A workload uses a waypoint only when it names one itself (a namespace's waypoint is for service
/// traffic) and that waypoint takes workload traffic.
pub(super) fn workload_waypoint(
    labels: &BTreeMap<String, String>,
    namespace: &str,
    registry: &Registry,
    mesh: &MeshSettings,
) -> Option<GatewayAddress> {
    let w = crate::model::waypoint::workload_waypoint(
        labels,
        namespace,
        registry,
        &mesh.domain_suffix,
    )?;
    Some(waypoint_address(&w.name, &w.namespace, registry, mesh))
}

/// The waypoint Service `name` in `namespace`: by its VIP when it has one, else by hostname
/// (ztunnel resolves it from the services it knows).
pub(super) fn waypoint_address(
    name: &str,
    namespace: &str,
    registry: &Registry,
    mesh: &MeshSettings,
) -> GatewayAddress {
    let hostname = format!("{name}.{namespace}.svc.{}", mesh.domain_suffix);
    let vip = registry
        .services
        .get(&hostname)
        .and_then(|s| s.addresses.iter().find_map(|a| a.parse::<IpAddr>().ok()));
    let destination = match vip {
        // In the network the waypoint's VIP is served in (the cluster's): ztunnel looks it up
        // by network and address.
        Some(ip) => gateway_address::Destination::Address(NetworkAddress {
            network: mesh.cluster_networks.local().to_string(),
            address: ip_bytes(ip),
            length: None,
        }),
        None => gateway_address::Destination::Hostname(NamespacedHostname {
            namespace: namespace.to_string(),
            hostname,
        }),
    };
    GatewayAddress {
        destination: Some(destination),
        hbone_mtls_port: HBONE_PORT,
    }
}

pub(super) fn locality(text: String) -> Locality {
    let mut parts = text.splitn(3, '/').map(str::to_string);
    Locality {
        region: parts.next().unwrap_or_default(),
        zone: parts.next().unwrap_or_default(),
        subzone: parts.next().unwrap_or_default(),
    }
}

/// istiod's app protocols: only the HTTP family is declared; the rest is left to detection.
pub(super) fn app_protocol(p: Protocol) -> AppProtocol {
    match p {
        Protocol::Http => AppProtocol::Http11,
        Protocol::Http2 => AppProtocol::Http2,
        Protocol::Grpc => AppProtocol::Grpc,
        _ => AppProtocol::Unknown,
    }
}

//! Ambient mode: what ztunnel needs to know (WDS): every workload and service as an `Address`, and
//! the L4 `Authorization` policies. Built from the store and the service registry, once per push
//! context and only when a client asks, so meshes without ztunnel pay nothing.

pub mod authorization;
mod build;
pub mod dump;
pub mod multi_network;
pub mod peer_auth;
mod pods;
mod waypoint_policy;

/// ztunnel's xDS types, compiled from `proto/istio/{workload,security}`.
#[allow(clippy::large_enum_variant)]
pub mod pb {
    pub mod workload {
        tonic::include_proto!("istio.workload");
    }
    pub mod security {
        tonic::include_proto!("istio.security");
    }
}

use crate::config::{Kind, Spec};
use crate::model::mesh::MeshSettings;
use crate::model::{Protocol, Registry};
use crate::store::Snapshot;
use crate::xds::context::PushContext;
use crate::xds::resource::Resource;
use crate::xds::types::TypeUrl;
use envoy_types::pb::google::protobuf::Any;
use pb::security::Authorization;
use pb::workload::{
    Address, AppProtocol, GatewayAddress, Locality, NamespacedHostname, NetworkAddress, PortList,
    Service, TunnelProtocol, Workload, address, gateway_address,
};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

pub use crate::model::waypoint::INGRESS_USE_WAYPOINT;

/// The ambient view of `ctx`, built on first use and shared for the life of the push.
pub fn index(ctx: &PushContext) -> Arc<AmbientIndex> {
    ctx.derived(|ctx| AmbientIndex::build(&ctx.snapshot, &ctx.registry, &ctx.mesh))
}

/// On a namespace (or a pod): `ambient` captures its pods; `none` on a pod opts it out.
pub const DATAPLANE_MODE: &str = "istio.io/dataplane-mode";
/// On a pod, service or namespace: the waypoint (a Service name) its traffic goes through.
const NETWORK_LABEL: &str = "topology.istio.io/network";
/// The port waypoints accept HBONE on.
const HBONE_PORT: u32 = 15008;
/// istiod's name for the DENY-plaintext policy that STRICT workloads reference.
pub const STATIC_STRICT_POLICY: &str = "istio_converted_static_strict";

/// An IP as ztunnel's wire form: 4 or 16 raw bytes.
pub fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// The ambient view of one push: protos for the debug dump, resources for xDS, and the indexes
/// for on-demand lookups by address.
#[derive(Default)]
pub struct AmbientIndex {
    /// By uid.
    pub workloads: BTreeMap<String, Workload>,
    /// By `namespace/hostname`.
    pub services: BTreeMap<String, Service>,
    /// By `namespace/name`.
    pub policies: BTreeMap<String, Authorization>,
    address_resources: BTreeMap<String, Arc<Resource>>,
    policy_resources: BTreeMap<String, Arc<Resource>>,
    /// `network/ip` → the resources answering for that address (workloads, or a service by VIP).
    by_address: HashMap<String, Vec<String>>,
    /// Service resource name → uids of the workloads behind it.
    service_workloads: HashMap<String, Vec<String>>,
    /// Workload-selector policies' labels by `namespace/name` (the resource does not carry them).
    selectors: HashMap<String, BTreeMap<String, String>>,
    /// Under ambient multi-network, the global services served, by `namespace/hostname`, with
    /// their waypoint (what an east-west gateway forwards to, and whose tunnels it takes).
    pub global_services: BTreeMap<String, Option<crate::model::waypoint::WaypointRef>>,
    /// Under ambient multi-network, each network's east-west gateways (HBONE), first preferred.
    pub network_gateways: BTreeMap<String, Vec<multi_network::AmbientNetworkGateway>>,
}

/// Everything a workload needs from its namespace.
struct NamespaceInfo<'a> {
    labels: Option<&'a BTreeMap<String, String>>,
}

impl NamespaceInfo<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.and_then(|l| l.get(key)).map(String::as_str)
    }
}

impl AmbientIndex {
    /// Policies first (workloads list the selector policies that apply to them), then the
    /// workloads of pods, WorkloadEntries and ServiceEntries, then the services
    /// (`build::Builder`), then, across networks, the far workloads and gateways.
    pub fn build(snapshot: &Snapshot, registry: &Registry, mesh: &MeshSettings) -> AmbientIndex {
        let mut index = AmbientIndex::default();
        let mut multi = multi_network::MultiNetwork::new(snapshot, registry, mesh);
        index.add_policies(snapshot, &mesh.root_namespace);
        let builder = build::Builder::new(snapshot, registry, mesh);
        for converted in peer_auth::converted_policies(&builder.peer_auth, &mesh.root_namespace) {
            index.add_policy(converted);
        }
        builder.pod_workloads(&mut index, &mut multi);
        builder.workload_entry_workloads(&mut index, &mut multi);
        builder.service_entry_workloads(&mut index, &mut multi);
        builder.services(&mut index, multi.as_ref());
        if let Some(m) = &multi {
            for w in m
                .split_horizon_workloads(&index.services)
                .into_iter()
                .chain(m.gateway_workloads())
            {
                index.add_workload(w);
            }
            index.network_gateways = m.gateways().clone();
        }
        let mut behind: HashMap<String, Vec<String>> = HashMap::new();
        for (uid, w) in &index.workloads {
            for svc in w.services.keys() {
                behind.entry(svc.clone()).or_default().push(uid.clone());
            }
        }
        index.service_workloads = behind;
        index
    }

    fn add_policies(&mut self, snapshot: &Snapshot, root_namespace: &str) {
        for e in snapshot.list(Kind::AuthorizationPolicy) {
            let Spec::AuthorizationPolicy(policy) = &e.config.spec else {
                continue;
            };
            let meta = &e.config.metadata;
            let converted = authorization::convert_stored(root_namespace, meta, policy);
            if !converted.ignored_http.is_empty() {
                tracing::debug!(
                    policy = %format!("{}/{}", meta.namespace, meta.name),
                    ignored = ?converted.ignored_http,
                    "ztunnel does not enforce HTTP attributes; a waypoint is needed for them"
                );
            }
            if let Some(a) = converted.authorization {
                if let Some(sel) = &policy.selector {
                    self.selectors.insert(
                        format!("{}/{}", meta.namespace, meta.name),
                        sel.match_labels.clone(),
                    );
                }
                self.add_policy(a);
            }
        }
        self.add_policy(authorization::static_strict(root_namespace));
    }

    fn add_policy(&mut self, a: Authorization) {
        let name = format!("{}/{}", a.namespace, a.name);
        let any = Any {
            type_url: TypeUrl::Authorization.url().to_string(),
            value: a.encode_to_vec(),
        };
        self.policy_resources
            .insert(name.clone(), Resource::new(name.clone(), any));
        self.policies.insert(name, a);
    }

    /// Workload-selector policies (its namespace's and the root namespace's) whose selector matches
    /// these labels, then the PeerAuthentication-derived ones (`peer_auth::workload_keys`).
    fn selected_policies(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        root_namespace: &str,
        peer_auth: Vec<String>,
    ) -> Vec<String> {
        let mut out: Vec<String> = self
            .policies
            .iter()
            .filter(|(_, a)| {
                a.scope == pb::security::Scope::WorkloadSelector as i32
                    && (a.namespace == namespace || a.namespace == root_namespace)
                    && a.name != STATIC_STRICT_POLICY
            })
            .filter(|(key, _)| {
                self.selectors
                    .get(*key)
                    .is_some_and(|sel| crate::config::mesh::labels_match(sel, labels))
            })
            .map(|(key, _)| key.clone())
            .collect();
        out.extend(peer_auth);
        out
    }

    /// Indexes one Address resource under `name`, and under each `network/ip` it answers for.
    fn add_address(&mut self, name: &str, addresses: &[(&str, &[u8])], address: address::Type) {
        for (network, bytes) in addresses {
            if let Some(ip) = ip_from_bytes(bytes) {
                self.by_address
                    .entry(format!("{network}/{ip}"))
                    .or_default()
                    .push(name.to_string());
            }
        }
        let any = Any {
            type_url: TypeUrl::Address.url().to_string(),
            value: Address {
                r#type: Some(address),
            }
            .encode_to_vec(),
        };
        self.address_resources
            .insert(name.to_string(), Resource::new(name, any));
    }

    /// Adds a workload ztunnel is served, unless it is another network's (`MultiNetwork::place`).
    fn admit(
        &mut self,
        multi: &mut Option<multi_network::MultiNetwork>,
        w: Workload,
        remote: bool,
    ) {
        match multi {
            Some(m) => {
                if let Some(w) = m.place(w, remote) {
                    self.add_workload(w);
                }
            }
            None => self.add_workload(w),
        }
    }

    fn add_workload(&mut self, w: Workload) {
        let addresses: Vec<(&str, &[u8])> = w
            .addresses
            .iter()
            .map(|a| (w.network.as_str(), a.as_slice()))
            .collect();
        self.add_address(&w.uid, &addresses, address::Type::Workload(w.clone()));
        self.workloads.insert(w.uid.clone(), w);
    }

    fn add_service(&mut self, s: Service) {
        let name = format!("{}/{}", s.namespace, s.hostname);
        let addresses: Vec<(&str, &[u8])> = s
            .addresses
            .iter()
            .map(|a| (a.network.as_str(), a.address.as_slice()))
            .collect();
        self.add_address(&name, &addresses, address::Type::Service(s.clone()));
        self.services.insert(name, s);
    }

    /// Every workload and service (a wildcard subscription).
    pub fn addresses(&self) -> Vec<Arc<Resource>> {
        self.address_resources.values().cloned().collect()
    }

    /// What answers for one subscribed name: a workload uid or `namespace/hostname` itself; a
    /// `network/ip` as the workload or service at that address, aliased to the name asked for, and
    /// for a service VIP the workloads behind it too (the client will connect to them next).
    pub fn lookup_address(&self, name: &str) -> Vec<Arc<Resource>> {
        if let Some(r) = self.address_resources.get(name) {
            return vec![r.clone()];
        }
        let mut out = Vec::new();
        for target in self.by_address.get(name).into_iter().flatten() {
            let Some(r) = self.address_resources.get(target) else {
                continue;
            };
            out.push(r.with_aliases(vec![name.to_string()]));
            for uid in self.service_workloads.get(target).into_iter().flatten() {
                if let Some(w) = self.address_resources.get(uid) {
                    out.push(w.clone());
                }
            }
        }
        out
    }

    /// Whether a workload at `ip` in `network` takes HBONE (it is in the ambient mesh): istiod's
    /// `SupportsTunnel`, which decides whether a waypoint tunnels to an endpoint or connects to
    /// it directly.
    pub fn supports_tunnel(&self, network: &str, ip: &str) -> bool {
        self.by_address
            .get(&format!("{network}/{ip}"))
            .into_iter()
            .flatten()
            .filter_map(|uid| self.workloads.get(uid))
            .any(|w| w.tunnel_protocol == TunnelProtocol::Hbone as i32)
    }

    /// The workloads scheduled on `node` (what an on-demand ztunnel of that node is sent
    /// without asking).
    pub fn node_local(&self, node: &str) -> Vec<Arc<Resource>> {
        self.workloads
            .iter()
            .filter(|(_, w)| w.node == node)
            .filter_map(|(uid, _)| self.address_resources.get(uid).cloned())
            .collect()
    }

    pub fn authorizations(&self) -> Vec<Arc<Resource>> {
        self.policy_resources.values().cloned().collect()
    }

    pub fn authorization(&self, name: &str) -> Option<Arc<Resource>> {
        self.policy_resources.get(name).cloned()
    }
}

fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(b).ok().map(IpAddr::from),
        _ => None,
    }
}

fn non_empty(s: &str, default: &str) -> String {
    if s.is_empty() {
        default.to_string()
    } else {
        s.to_string()
    }
}

/// A workload that terminates HBONE itself (a sidecar with `ENABLE_HBONE`, which the injector
/// labels `networking.istio.io/tunnel: http`): ztunnel sends it HBONE, as istiod tells it.
fn native_tunnel(labels: &BTreeMap<String, String>) -> bool {
    labels.get(TUNNEL_LABEL).is_some_and(|t| t == "http")
}

/// The label of a workload that takes HBONE itself.
pub const TUNNEL_LABEL: &str = "networking.istio.io/tunnel";

fn tunnel(captured: bool) -> TunnelProtocol {
    if captured {
        TunnelProtocol::Hbone
    } else {
        TunnelProtocol::None
    }
}

/// istiod's rule: a pod is in ambient mode when it or its namespace says `ambient`, unless the pod
/// says `none`, runs on the host network, or already has a sidecar.
fn captured(
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

/// A WorkloadEntry's labels: the object's, then its spec's (which win).
pub(crate) fn workload_entry_labels(
    meta: &crate::config::ObjectMeta,
    we: &crate::config::networking::WorkloadEntry,
) -> BTreeMap<String, String> {
    meta.labels
        .iter()
        .chain(we.labels.iter())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A workload uses a waypoint only when it names one itself (a namespace's waypoint is for service
/// traffic) and that waypoint takes workload traffic.
fn workload_waypoint(
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
fn waypoint_address(
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

fn locality(text: String) -> Locality {
    let mut parts = text.splitn(3, '/').map(str::to_string);
    Locality {
        region: parts.next().unwrap_or_default(),
        zone: parts.next().unwrap_or_default(),
        subzone: parts.next().unwrap_or_default(),
    }
}

/// istiod's app protocols: only the HTTP family is declared; the rest is left to detection.
fn app_protocol(p: Protocol) -> AppProtocol {
    match p {
        Protocol::Http => AppProtocol::Http11,
        Protocol::Http2 => AppProtocol::Http2,
        Protocol::Grpc => AppProtocol::Grpc,
        _ => AppProtocol::Unknown,
    }
}

#[cfg(test)]
mod tests;

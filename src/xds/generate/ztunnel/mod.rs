//! Ambient mode: what ztunnel needs to know (WDS): every workload and service as an `Address`, and
//! the L4 `Authorization` policies. Built from the store and the service registry, once per push
//! context and only when a client asks, so meshes without ztunnel pay nothing.

pub mod authorization;
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

use crate::config::networking::Resolution;
use crate::config::security::PeerAuthentication;
use crate::config::{Config, ConfigKey, Kind, Spec};
use crate::model::mesh::MeshSettings;
use crate::model::{Protocol, Registry};
use crate::store::Snapshot;
use crate::xds::context::PushContext;
use crate::xds::resource::Resource;
use crate::xds::types::TypeUrl;
use envoy_types::pb::google::protobuf::Any;
use pb::security::Authorization;
use pb::workload::{
    Address, AppProtocol, GatewayAddress, Locality, NamespacedHostname, NetworkAddress, Port,
    PortList, Service, TunnelProtocol, Workload, WorkloadStatus, WorkloadType, address,
    gateway_address,
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
    pub fn build(snapshot: &Snapshot, registry: &Registry, mesh: &MeshSettings) -> AmbientIndex {
        let mut index = AmbientIndex::default();
        // By (cluster, name): a remote cluster's pods are read with its own namespaces and nodes.
        let namespaces: HashMap<(&str, &str), &BTreeMap<String, String>> = snapshot
            .list(Kind::Namespace)
            .map(|e| {
                let meta = &e.config.metadata;
                ((meta.cluster.as_str(), meta.name.as_str()), &meta.labels)
            })
            .collect();
        let ns_in = |cluster: &str, ns: &str| NamespaceInfo {
            labels: namespaces.get(&(cluster, ns)).copied(),
        };
        let ns_info = |ns: &str| ns_in("", ns);
        let mut multi = multi_network::MultiNetwork::new(snapshot, registry, mesh);
        let admitted =
            crate::model::kubernetes::namespace_filter(snapshot, &mesh.discovery_selectors);
        let allowed = |ns: &str| admitted.as_ref().is_none_or(|set| set.contains(ns));

        // Policies first: workloads list the selector policies that apply to them.
        index.add_policies(snapshot, &mesh.root_namespace);
        let peer_auth: Vec<(&Config, &PeerAuthentication)> = snapshot
            .list(Kind::PeerAuthentication)
            .filter_map(|e| match &e.config.spec {
                Spec::PeerAuthentication(pa) => Some((e.config.as_ref(), pa)),
                _ => None,
            })
            .collect();
        for converted in peer_auth::converted_policies(&peer_auth, &mesh.root_namespace) {
            index.add_policy(converted);
        }

        // Which services each address serves, from the endpoints the registry already joined.
        let mut serving: HashMap<(&str, &str), BTreeMap<String, Vec<Port>>> = HashMap::new();
        for ((host, service_port), endpoints) in &registry.endpoints {
            let Some(svc) = registry.services.get(host) else {
                continue;
            };
            let protocol = svc.port(*service_port).map(|p| app_protocol(p.protocol));
            for e in endpoints.iter() {
                let ports = serving
                    .entry((e.cluster.as_str(), e.address.as_str()))
                    .or_default()
                    .entry(format!("{}/{host}", svc.namespace))
                    .or_default();
                let port = Port {
                    service_port: *service_port,
                    target_port: e.port,
                    app_protocol: protocol.unwrap_or(AppProtocol::Unknown) as i32,
                };
                if !ports.contains(&port) {
                    ports.push(port);
                }
            }
        }
        let services_of = |cluster: &str, ips: &[IpAddr]| -> HashMap<String, PortList> {
            let mut out: HashMap<String, PortList> = HashMap::new();
            for ip in ips {
                let ip = ip.to_string();
                for (svc, ports) in serving.get(&(cluster, ip.as_str())).into_iter().flatten() {
                    out.entry(svc.clone())
                        .or_default()
                        .ports
                        .extend(ports.iter().cloned());
                }
            }
            out
        };

        let nodes: HashMap<(&str, &str), &k8s_openapi::api::core::v1::Node> = snapshot
            .list(Kind::Node)
            .filter_map(|e| match &e.config.spec {
                Spec::Node(n) => Some((
                    (
                        e.config.metadata.cluster.as_str(),
                        e.config.metadata.name.as_str(),
                    ),
                    n.as_ref(),
                )),
                _ => None,
            })
            .collect();

        // Remote clusters' pods only across networks; without it ztunnel knows the config
        // cluster's, as istiod's single-cluster index.
        let every_cluster = multi.is_some();
        let pods = snapshot
            .list(Kind::Pod)
            .filter(|e| every_cluster || e.config.metadata.cluster.is_empty());
        for entry in pods {
            let Spec::Pod(pod) = &entry.config.spec else {
                continue;
            };
            let meta = &entry.config.metadata;
            if !allowed(&meta.namespace) {
                continue;
            }
            let ns = ns_in(&meta.cluster, &meta.namespace);
            let Some(mut w) = pods::pod_workload(&entry.config, pod, &ns, registry, mesh) else {
                continue;
            };
            let ips: Vec<IpAddr> = w
                .addresses
                .iter()
                .filter_map(|a| ip_from_bytes(a))
                .collect();
            w.services = services_of(&meta.cluster, &ips);
            if let Some(node) = nodes.get(&(meta.cluster.as_str(), w.node.as_str())) {
                let text = crate::model::kubernetes::node_locality(Some(node), None);
                w.locality = (!text.is_empty()).then(|| locality(text));
            }
            w.authorization_policies = index.selected_policies(
                &meta.namespace,
                &meta.labels,
                &mesh.root_namespace,
                peer_auth::workload_keys(
                    &peer_auth,
                    &mesh.root_namespace,
                    &meta.namespace,
                    &meta.labels,
                ),
            );
            let ns_labels = namespaces.get(&(meta.cluster.as_str(), meta.namespace.as_str()));
            let implicit = index.waypoint_policies(
                (snapshot, registry, mesh),
                (&meta.namespace, &meta.labels, ns_labels.copied()),
                &w.services,
            );
            w.authorization_policies.extend(implicit);
            index.admit(&mut multi, w, !meta.cluster.is_empty());
        }
        for entry in snapshot.list(Kind::WorkloadEntry) {
            let Spec::WorkloadEntry(we) = &entry.config.spec else {
                continue;
            };
            let meta = &entry.config.metadata;
            if !allowed(&meta.namespace) {
                continue;
            }
            let Ok(ip) = we.address.parse::<IpAddr>() else {
                continue;
            };
            let ns = ns_info(&meta.namespace);
            let labels = workload_entry_labels(meta, we);
            let (canonical_name, canonical_revision) =
                crate::model::workload::canonical(&labels, &meta.name);
            let mut w = Workload {
                uid: format!(
                    "{}/networking.istio.io/WorkloadEntry/{}/{}",
                    mesh.cluster_id, meta.namespace, meta.name
                ),
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                addresses: vec![ip_bytes(ip)],
                // Its own, its label's, else the cluster's network (as a pod's).
                network: if we.network.is_empty() {
                    labels
                        .get(NETWORK_LABEL)
                        .cloned()
                        .unwrap_or_else(|| mesh.cluster_networks.local().to_string())
                } else {
                    we.network.clone()
                },
                tunnel_protocol: tunnel(
                    captured(&labels, None, false, &ns) || native_tunnel(&labels),
                ) as i32,
                native_tunnel: native_tunnel(&labels),
                trust_domain: mesh.trust_domain.clone(),
                service_account: non_empty(&we.service_account, "default"),
                waypoint: workload_waypoint(&labels, &meta.namespace, registry, mesh),
                canonical_name,
                canonical_revision,
                workload_type: WorkloadType::Pod as i32,
                workload_name: meta.name.clone(),
                services: services_of("", &[ip]),
                status: WorkloadStatus::Healthy as i32,
                cluster_id: mesh.cluster_id.clone(),
                locality: (!we.locality.is_empty()).then(|| locality(we.locality.clone())),
                ..Default::default()
            };
            w.authorization_policies = index.selected_policies(
                &meta.namespace,
                &labels,
                &mesh.root_namespace,
                peer_auth::workload_keys(
                    &peer_auth,
                    &mesh.root_namespace,
                    &meta.namespace,
                    &labels,
                ),
            );
            let ns_labels = namespaces.get(&("", meta.namespace.as_str()));
            let implicit = index.waypoint_policies(
                (snapshot, registry, mesh),
                (&meta.namespace, &labels, ns_labels.copied()),
                &w.services,
            );
            w.authorization_policies.extend(implicit);
            index.admit(&mut multi, w, false);
        }
        // ServiceEntries' inline endpoints are workloads; a DNS ServiceEntry without endpoints
        // is one workload per host, by hostname (istiod's `serviceEntryWorkloadBuilder`).
        for entry in snapshot.list(Kind::ServiceEntry) {
            let Spec::ServiceEntry(se) = &entry.config.spec else {
                continue;
            };
            let meta = &entry.config.metadata;
            if !allowed(&meta.namespace) {
                continue;
            }
            let source = format!("ServiceEntry/{}/{}", meta.namespace, meta.name);
            let services: Vec<&Arc<crate::model::Service>> = registry
                .services
                .values()
                .filter(|s| s.source == source)
                .collect();
            if services.is_empty() {
                continue;
            }
            let implicit = se.endpoints.is_empty()
                && se.workload_selector.is_none()
                && matches!(
                    se.resolution,
                    Resolution::DNS | Resolution::DNS_ROUND_ROBIN | Resolution::DYNAMIC_DNS
                );
            let endpoints: Vec<(
                crate::config::networking::WorkloadEntry,
                Vec<&Arc<crate::model::Service>>,
            )> = if implicit {
                services
                    .iter()
                    .map(|s| {
                        (
                            crate::config::networking::WorkloadEntry {
                                address: s.hostname.clone(),
                                ..Default::default()
                            },
                            vec![*s],
                        )
                    })
                    .collect()
            } else {
                se.endpoints
                    .iter()
                    .map(|e| (e.clone(), services.clone()))
                    .collect()
            };
            let ns = ns_info(&meta.namespace);
            let (canonical_name, canonical_revision) =
                crate::model::workload::canonical(&meta.labels, &meta.name);
            let policies = index.selected_policies(
                &meta.namespace,
                &meta.labels,
                &mesh.root_namespace,
                peer_auth::workload_keys(
                    &peer_auth,
                    &mesh.root_namespace,
                    &meta.namespace,
                    &meta.labels,
                ),
            );
            for (ep, services) in endpoints {
                let ip = ep.address.parse::<IpAddr>().ok();
                let mut ports: HashMap<String, PortList> = HashMap::new();
                for svc in &services {
                    let list = ports
                        .entry(format!("{}/{}", svc.namespace, svc.hostname))
                        .or_default();
                    for p in &svc.ports {
                        let target =
                            ep.ports
                                .get(&p.name)
                                .copied()
                                .unwrap_or(if p.target_port > 0 {
                                    p.target_port
                                } else {
                                    p.number
                                });
                        list.ports.push(Port {
                            service_port: p.number,
                            target_port: target,
                            app_protocol: app_protocol(p.protocol) as i32,
                        });
                    }
                }
                let w = Workload {
                    uid: format!(
                        "{}/networking.istio.io/ServiceEntry/{}/{}/{}",
                        mesh.cluster_id, meta.namespace, meta.name, ep.address
                    ),
                    name: meta.name.clone(),
                    namespace: meta.namespace.clone(),
                    addresses: ip.map(ip_bytes).into_iter().collect(),
                    hostname: if ip.is_some() {
                        String::new()
                    } else {
                        ep.address.clone()
                    },
                    network: if ep.network.is_empty() {
                        ns.label(NETWORK_LABEL)
                            .unwrap_or(mesh.cluster_networks.local())
                            .to_string()
                    } else {
                        ep.network.clone()
                    },
                    tunnel_protocol: tunnel(
                        captured(&meta.labels, None, false, &ns) || native_tunnel(&meta.labels),
                    ) as i32,
                    native_tunnel: native_tunnel(&meta.labels),
                    trust_domain: mesh.trust_domain.clone(),
                    service_account: ep.service_account.clone(),
                    waypoint: if implicit {
                        None
                    } else {
                        workload_waypoint(&ep.labels, &meta.namespace, registry, mesh)
                    },
                    canonical_name: canonical_name.clone(),
                    canonical_revision: canonical_revision.clone(),
                    workload_type: WorkloadType::Pod as i32,
                    workload_name: meta.name.clone(),
                    services: ports,
                    authorization_policies: policies.clone(),
                    status: WorkloadStatus::Healthy as i32,
                    cluster_id: mesh.cluster_id.clone(),
                    locality: (!ep.locality.is_empty()).then(|| locality(ep.locality.clone())),
                    capacity: (ep.weight > 0).then_some(ep.weight),
                    ..Default::default()
                };
                index.admit(&mut multi, w, false);
            }
        }
        for svc in registry.services.values() {
            let (kind, name) = match svc.origin() {
                ("Service", name) => (Kind::Service, name),
                (_, name) => (Kind::ServiceEntry, name),
            };
            let local = snapshot.get(&ConfigKey {
                kind,
                namespace: svc.namespace.clone(),
                name: name.to_string(),
                cluster: String::new(),
            });
            let key = format!("{}/{}", svc.namespace, svc.hostname);
            // A service only a remote cluster defines is ztunnel's only when global (istiod's
            // index reads the config cluster's alone without multi-network).
            let served = match &multi {
                Some(m) => m.serves(&key, local.is_some()),
                None => local.is_some(),
            };
            if !served {
                continue;
            }
            let labels = local
                .map(|e| e.config.metadata.labels.clone())
                .unwrap_or_default();
            let ns = ns_info(&svc.namespace);
            let waypoint = crate::model::waypoint::service_waypoint(
                svc,
                ns.labels,
                registry,
                &mesh.domain_suffix,
            );
            // The namespace's network, else the cluster's (as istiod's service builder).
            let network = ns
                .label(NETWORK_LABEL)
                .unwrap_or(mesh.cluster_networks.local())
                .to_string();
            // ztunnel resolves nothing by name: a ServiceEntry's auto-allocated VIPs are its VIPs.
            let mut addresses: Vec<NetworkAddress> = svc
                .addresses_for(true)
                .iter()
                .filter_map(|a| a.parse::<IpAddr>().ok())
                .map(|ip| NetworkAddress {
                    network: network.clone(),
                    address: ip_bytes(ip),
                    length: None,
                })
                .collect();
            let mut subject_alt_names = Vec::new();
            if let Some(m) = multi.as_ref().filter(|m| m.is_global(&key)) {
                // A Service's VIPs in every cluster that has it; a ServiceEntry is the config
                // cluster's alone.
                if kind == Kind::Service {
                    addresses = multi_network::MultiNetwork::global_vips(
                        snapshot,
                        &svc.namespace,
                        name,
                        &mesh.cluster_networks,
                    );
                }
                subject_alt_names = m.identities(&key).into_iter().collect();
                index.global_services.insert(key.clone(), waypoint.clone());
            }
            let service = Service {
                name: name.to_string(),
                namespace: svc.namespace.clone(),
                hostname: svc.hostname.clone(),
                addresses,
                subject_alt_names,
                ports: svc
                    .ports
                    .iter()
                    .map(|p| Port {
                        service_port: p.number,
                        target_port: p.target_port,
                        app_protocol: app_protocol(p.protocol) as i32,
                    })
                    .collect(),
                waypoint: waypoint.map(|w| waypoint_address(&w.name, &w.namespace, registry, mesh)),
                ingress_use_waypoint: crate::model::waypoint::ingress_uses_waypoint(
                    &labels, ns.labels,
                ),
                ..Default::default()
            };
            index.add_service(service);
        }
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

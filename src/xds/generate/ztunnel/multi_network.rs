//! Ambient across networks, as istiod 1.30 does it behind its alpha AMBIENT_ENABLE_MULTI_NETWORK:
//! ztunnel gets the workloads of its own network from every cluster, and, for each global service
//! and other network, one split-horizon workload standing for all that network's endpoints of the
//! service, reached through the network's east-west gateway (double HBONE). Which services are
//! global is MeshConfig `serviceScopeConfigs`; a remote cluster's other services are not served.

use super::fields::{NETWORK_LABEL, ip_bytes};
use super::pb::workload::{
    GatewayAddress, NamespacedHostname, NetworkAddress, PortList, Service, TunnelProtocol,
    Workload, WorkloadType, gateway_address,
};
use crate::config::gateway_api::{EAST_WEST_CLASS, REMOTE_CLASS, SERVICE_ACCOUNT_ANNOTATION};
use crate::config::mesh::{ServiceScope, ServiceScopeConfig, selector_matches};
use crate::config::{Kind, Spec};
use crate::model::mesh::MeshSettings;
use crate::model::network::ClusterNetworks;
use crate::model::{Registry, Service as ModelService};
use crate::store::Snapshot;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

/// The port east-west gateways take HBONE on when the Gateway does not say.
const DEFAULT_HBONE_PORT: u32 = 15008;

/// A network's east-west gateway as ztunnel is told of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AmbientNetworkGateway {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    /// An IP, or a hostname.
    pub address: String,
    /// The HBONE port the Gateway declares (an `istio-remote` one's listener); 0 for a remote
    /// cluster's east-west gateway, as istiod leaves it (15008 then, `port`).
    pub hbone_port: u32,
    /// The identity its pods run as (istiod's `GatewaySA`): the `gateway.istio.io/service-account`
    /// annotation, else `<name>-istio-remote` for a stand-in, else the Gateway's name.
    pub service_account: String,
}

impl AmbientNetworkGateway {
    /// The port HBONE reaches it on.
    pub fn port(&self) -> u32 {
        if self.hbone_port == 0 {
            DEFAULT_HBONE_PORT
        } else {
            self.hbone_port
        }
    }
}

/// What one other network holds of one global service.
#[derive(Default)]
struct Elsewhere {
    capacity: u32,
    identities: BTreeSet<String>,
}

/// The multi-network view of one push; absent when the switch is off.
pub struct MultiNetwork {
    pub local_network: String,
    /// `namespace/hostname` of the global services.
    global: HashSet<String>,
    gateways: BTreeMap<String, Vec<AmbientNetworkGateway>>,
    /// (`namespace/hostname`, network) → that network's workloads of the service.
    elsewhere: BTreeMap<(String, String), Elsewhere>,
    trust_domain: String,
    local_cluster_id: String,
}

impl MultiNetwork {
    pub fn new(snapshot: &Snapshot, registry: &Registry, mesh: &MeshSettings) -> Option<Self> {
        if !mesh.ambient_multi_network {
            return None;
        }
        let global = registry
            .services
            .values()
            .filter(|svc| service_scope(snapshot, svc, &mesh.service_scope) == ServiceScope::GLOBAL)
            .map(|svc| format!("{}/{}", svc.namespace, svc.hostname))
            .collect();
        Some(MultiNetwork {
            local_network: mesh.cluster_networks.local().to_string(),
            global,
            gateways: gateways(snapshot),
            elsewhere: BTreeMap::new(),
            trust_domain: mesh.trust_domain.clone(),
            local_cluster_id: mesh.cluster_id.clone(),
        })
    }

    pub fn gateways(&self) -> &BTreeMap<String, Vec<AmbientNetworkGateway>> {
        &self.gateways
    }

    pub fn is_global(&self, service_key: &str) -> bool {
        self.global.contains(service_key)
    }

    /// Whether `svc` is served to ztunnel: the config cluster's services and ServiceEntries, and
    /// a remote cluster's services when global.
    pub fn serves(&self, service_key: &str, defined_locally: bool) -> bool {
        defined_locally || self.is_global(service_key)
    }

    /// The workload as ztunnel gets it, or `None` when it is in another network: then it counts
    /// toward that network's split-horizon workload of each global service it serves. A remote
    /// cluster's workload serves only global services.
    pub fn place(&mut self, mut w: Workload, remote: bool) -> Option<Workload> {
        if remote {
            w.services.retain(|svc, _| self.global.contains(svc));
        }
        if w.network == self.local_network {
            return Some(w);
        }
        for svc in w.services.keys().filter(|s| self.global.contains(*s)) {
            let entry = self
                .elsewhere
                .entry((svc.clone(), w.network.clone()))
                .or_default();
            entry.capacity += w.capacity.filter(|c| *c > 0).unwrap_or(1);
            entry.identities.insert(format!(
                "spiffe://{}/ns/{}/sa/{}",
                self.trust_domain, w.namespace, w.service_account
            ));
        }
        None
    }

    /// A global service's VIPs in every cluster that defines it, each in its cluster's network
    /// (istiod merges them: VIPs are unique within a network).
    pub fn global_vips(
        snapshot: &Snapshot,
        namespace: &str,
        name: &str,
        networks: &ClusterNetworks,
    ) -> Vec<NetworkAddress> {
        let mut vips: BTreeSet<(String, IpAddr)> = BTreeSet::new();
        for e in snapshot.get_all_clusters(Kind::Service, namespace, name) {
            let Spec::Service(svc) = &e.config.spec else {
                continue;
            };
            let spec = svc.spec.as_ref();
            let ips = spec
                .and_then(|s| s.cluster_ips.clone())
                .filter(|ips| !ips.is_empty())
                .or_else(|| spec.and_then(|s| s.cluster_ip.clone()).map(|ip| vec![ip]))
                .unwrap_or_default();
            for ip in ips.iter().filter_map(|ip| ip.parse::<IpAddr>().ok()) {
                let network = networks
                    .network(&e.config.metadata.cluster, &ip.to_string())
                    .unwrap_or_default()
                    .to_string();
                vips.insert((network, ip));
            }
        }
        vips.into_iter()
            .map(|(network, ip)| NetworkAddress {
                network,
                address: ip_bytes(ip),
                length: None,
            })
            .collect()
    }

    /// The identities of `service_key`'s workloads in other networks, which ztunnel checks the
    /// far end against (istiod adds them to the service's `subject_alt_names`).
    pub fn identities(&self, service_key: &str) -> BTreeSet<String> {
        self.elsewhere
            .range((service_key.to_string(), String::new())..)
            .take_while(|((svc, _), _)| svc == service_key)
            .flat_map(|(_, e)| e.identities.iter().cloned())
            .collect()
    }

    /// Each east-west gateway as a workload of its network (istiod's `NetworkGateway/<network>/
    /// <address>/<port>`): how ztunnel finds the gateway a split-horizon workload names, and the
    /// identity the gateway must prove at the outer tunnel.
    pub fn gateway_workloads(&self) -> Vec<Workload> {
        self.gateways
            .iter()
            .flat_map(|(network, gws)| gws.iter().map(move |g| (network, g)))
            .map(|(network, g)| {
                let uid = format!("NetworkGateway/{network}/{}/{}", g.address, g.hbone_port);
                let ip = g.address.parse::<IpAddr>().ok();
                Workload {
                    uid: uid.clone(),
                    name: uid,
                    namespace: g.namespace.clone(),
                    service_account: g.service_account.clone(),
                    network: network.clone(),
                    trust_domain: self.trust_domain.clone(),
                    addresses: ip.map(ip_bytes).into_iter().collect(),
                    hostname: if ip.is_some() {
                        String::new()
                    } else {
                        g.address.clone()
                    },
                    ..Default::default()
                }
            })
            .collect()
    }

    /// One workload per (other network, global service), at that network's first east-west
    /// gateway: `<network>/SplitHorizonWorkload/<gateway ns>/<gateway name>/<address>/<service>`.
    /// A network without a gateway is unreachable: its endpoints are left out (logged).
    pub fn split_horizon_workloads(&self, services: &BTreeMap<String, Service>) -> Vec<Workload> {
        let mut out = Vec::new();
        for ((svc_key, network), e) in &self.elsewhere {
            let Some(svc) = services.get(svc_key) else {
                continue;
            };
            let Some(gw) = self.gateways.get(network).and_then(|g| g.first()) else {
                tracing::debug!(
                    network,
                    service = svc_key,
                    "no east-west gateway for the network; its endpoints are not reachable from here"
                );
                continue;
            };
            let uid = format!(
                "{network}/SplitHorizonWorkload/{}/{}/{}/{svc_key}",
                gw.namespace, gw.name, gw.address
            );
            let destination = match gw.address.parse::<IpAddr>() {
                Ok(ip) => gateway_address::Destination::Address(NetworkAddress {
                    network: network.clone(),
                    address: ip_bytes(ip),
                    length: None,
                }),
                Err(_) => gateway_address::Destination::Hostname(NamespacedHostname {
                    namespace: gw.namespace.clone(),
                    hostname: gw.address.clone(),
                }),
            };
            out.push(Workload {
                uid: uid.clone(),
                name: uid,
                namespace: svc.namespace.clone(),
                network: network.clone(),
                trust_domain: self.trust_domain.clone(),
                capacity: Some(e.capacity),
                workload_type: WorkloadType::Pod as i32,
                tunnel_protocol: TunnelProtocol::Hbone as i32,
                network_gateway: Some(GatewayAddress {
                    destination: Some(destination),
                    hbone_mtls_port: gw.port(),
                }),
                cluster_id: if gw.cluster.is_empty() {
                    self.local_cluster_id.clone()
                } else {
                    gw.cluster.clone()
                },
                services: [(
                    svc_key.clone(),
                    PortList {
                        ports: svc.ports.clone(),
                    },
                )]
                .into(),
                ..Default::default()
            });
        }
        out
    }
}

/// A service's scope: the first `serviceScopeConfigs` entry with `GLOBAL` whose selectors match
/// the service's namespace and its own labels (the config cluster's definition when it has one,
/// as the registry keeps it), else local, as istiod's `matchServiceScope`.
fn service_scope(
    snapshot: &Snapshot,
    svc: &ModelService,
    configs: &[ServiceScopeConfig],
) -> ServiceScope {
    // The cluster whose namespace labels apply: a ServiceEntry's is the config cluster.
    let cluster = match svc.origin() {
        ("Service", name) => snapshot
            .get_all_clusters(Kind::Service, &svc.namespace, name)
            .next()
            .map_or("", |e| e.config.metadata.cluster.as_str()),
        _ => "",
    };
    scope_of(snapshot, cluster, &svc.namespace, &svc.labels, configs)
}

fn scope_of(
    snapshot: &Snapshot,
    cluster: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    configs: &[ServiceScopeConfig],
) -> ServiceScope {
    // Files mode has no Namespace objects: a namespace without one has no labels.
    let no_labels = BTreeMap::new();
    let ns_labels = snapshot
        .get_in(Kind::Namespace, cluster, "", namespace)
        .map_or(&no_labels, |ns| &ns.config.metadata.labels);
    let matches = |sel: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
                   labels: &BTreeMap<String, String>| {
        sel.as_ref().is_none_or(|s| selector_matches(s, labels))
    };
    let global = configs.iter().any(|c| {
        c.scope == ServiceScope::GLOBAL
            && matches(&c.namespace_selector, ns_labels)
            && matches(&c.services_selector, labels)
    });
    if global {
        ServiceScope::GLOBAL
    } else {
        ServiceScope::LOCAL
    }
}

/// The east-west gateways of each network, as istiod finds them: a remote cluster's Gateways of
/// class `istio-east-west` labelled with their network and with an HBONE listener terminating
/// TLS, at the addresses their status reports; and the config cluster's Gateways of class
/// `istio-remote` standing for another network's gateway (HBONE on their listener's port).
pub fn gateways(snapshot: &Snapshot) -> BTreeMap<String, Vec<AmbientNetworkGateway>> {
    let mut out: BTreeMap<String, Vec<AmbientNetworkGateway>> = BTreeMap::new();
    for e in snapshot.list(Kind::KubernetesGateway) {
        let Spec::KubernetesGateway(gw) = &e.config.spec else {
            continue;
        };
        let meta = &e.config.metadata;
        let Some(network) = meta.labels.get(NETWORK_LABEL).filter(|n| !n.is_empty()) else {
            continue;
        };
        let remote = !meta.cluster.is_empty();
        let hbone = gw.listeners.iter().find(|l| {
            l.protocol == "HBONE"
                && (!remote
                    || l.tls
                        .as_ref()
                        .is_some_and(|t| t.mode.as_deref().is_none_or(|m| m == "Terminate")))
        });
        let Some(listener) = hbone else {
            continue;
        };
        let (class, hbone_port) = if remote {
            (EAST_WEST_CLASS, 0)
        } else {
            (REMOTE_CLASS, listener.port)
        };
        if gw.gateway_class_name != class {
            continue;
        }
        let service_account = match meta.annotations.get(SERVICE_ACCOUNT_ANNOTATION) {
            Some(sa) if !sa.is_empty() => sa.clone(),
            _ if !remote => format!("{}-{REMOTE_CLASS}", meta.name),
            _ => meta.name.clone(),
        };
        // A remote's east-west gateway is known by the addresses its own control plane reports;
        // the config cluster's stand-in by the ones it is given.
        let status: Vec<(Option<String>, String)> = e
            .config
            .status_addresses()
            .iter()
            .map(|a| {
                (
                    a.get("type").and_then(|t| t.as_str()).map(str::to_string),
                    a.get("value")
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        let addresses: Vec<(Option<String>, String)> = if status.is_empty() && !remote {
            gw.addresses
                .iter()
                .map(|a| (a.address_type.clone(), a.value.clone()))
                .collect()
        } else {
            status
        };
        for (kind, value) in addresses {
            let kind = kind.as_deref().unwrap_or("IPAddress");
            if !matches!(kind, "IPAddress" | "Hostname") || value.is_empty() {
                continue;
            }
            out.entry(network.clone())
                .or_default()
                .push(AmbientNetworkGateway {
                    cluster: meta.cluster.clone(),
                    namespace: meta.namespace.clone(),
                    name: meta.name.clone(),
                    address: value,
                    hbone_port,
                    service_account: service_account.clone(),
                });
        }
    }
    for gws in out.values_mut() {
        gws.sort();
    }
    out
}

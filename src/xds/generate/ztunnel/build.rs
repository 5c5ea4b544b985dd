//! The inputs `AmbientIndex::build` reads, gathered once (namespaces and nodes by cluster, the
//! PeerAuthentications, which address serves which service ports), and one method per source of
//! workloads and services.

use super::fields::{
    NETWORK_LABEL, NamespaceInfo, app_protocol, captured, ip_bytes, ip_from_bytes, locality,
    native_tunnel, non_empty, tunnel, waypoint_address, workload_waypoint,
};
use super::index::AmbientIndex;
use super::multi_network::MultiNetwork;
use super::pb::workload::WorkloadType;
use super::pb::workload::{NetworkAddress, Port, PortList, Service, Workload, WorkloadStatus};
use super::{peer_auth, pods};
use crate::config::networking::{Resolution, WorkloadEntry};
use crate::config::security::PeerAuthentication;
use crate::config::{Config, ConfigKey, Kind, ObjectMeta, Spec};
use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::Snapshot;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

/// Service ports by `namespace/hostname`, per (cluster, address) serving them.
type Serving<'a> = HashMap<(&'a str, &'a str), BTreeMap<String, Vec<Port>>>;

pub(super) struct Builder<'a> {
    snapshot: &'a Snapshot,
    registry: &'a Registry,
    mesh: &'a MeshSettings,
    /// By (cluster, name): a remote cluster's pods are read with its own namespaces and nodes.
    namespaces: HashMap<(&'a str, &'a str), &'a BTreeMap<String, String>>,
    nodes: HashMap<(&'a str, &'a str), &'a k8s_openapi::api::core::v1::Node>,
    pub(super) peer_auth: Vec<(&'a Config, &'a PeerAuthentication)>,
    /// Which services each address serves, from the endpoints the registry already joined.
    serving: Serving<'a>,
    /// The namespaces discovery selectors admit (`None`: all).
    admitted: Option<BTreeSet<String>>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(
        snapshot: &'a Snapshot,
        registry: &'a Registry,
        mesh: &'a MeshSettings,
    ) -> Builder<'a> {
        let namespaces = snapshot
            .list(Kind::Namespace)
            .map(|e| {
                let meta = &e.config.metadata;
                ((meta.cluster.as_str(), meta.name.as_str()), &meta.labels)
            })
            .collect();
        let nodes = snapshot
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
        let peer_auth = snapshot
            .list(Kind::PeerAuthentication)
            .filter_map(|e| match &e.config.spec {
                Spec::PeerAuthentication(pa) => Some((e.config.as_ref(), pa)),
                _ => None,
            })
            .collect();
        Builder {
            snapshot,
            registry,
            mesh,
            namespaces,
            nodes,
            peer_auth,
            serving: serving(registry),
            admitted: crate::model::kubernetes::namespace_filter(
                snapshot,
                &mesh.discovery_selectors,
            ),
        }
    }

    fn allowed(&self, ns: &str) -> bool {
        self.admitted.as_ref().is_none_or(|set| set.contains(ns))
    }

    fn ns_in(&self, cluster: &str, ns: &str) -> NamespaceInfo<'a> {
        NamespaceInfo {
            labels: self.namespaces.get(&(cluster, ns)).copied(),
        }
    }

    /// The service ports the addresses `ips` of `cluster` serve.
    fn services_of(&self, cluster: &str, ips: &[IpAddr]) -> BTreeMap<String, PortList> {
        let mut out: BTreeMap<String, PortList> = BTreeMap::new();
        for ip in ips {
            let ip = ip.to_string();
            let served = self.serving.get(&(cluster, ip.as_str()));
            for (svc, ports) in served.into_iter().flatten() {
                out.entry(svc.clone())
                    .or_default()
                    .ports
                    .extend(ports.iter().cloned());
            }
        }
        out
    }

    /// The policy names a workload of `ns` (of `cluster`) with `labels` references: the
    /// selector policies and PeerAuthentication conversions that apply, then the implicit
    /// waypoint policy of the services it serves.
    fn policies(
        &self,
        index: &mut AmbientIndex,
        (cluster, ns, labels): (&str, &str, &BTreeMap<String, String>),
        services: &BTreeMap<String, PortList>,
    ) -> Vec<String> {
        let root = &self.mesh.root_namespace;
        let mut policies = index.selected_policies(
            ns,
            labels,
            root,
            peer_auth::workload_keys(&self.peer_auth, root, ns, labels),
        );
        let ns_labels = self.namespaces.get(&(cluster, ns)).copied();
        policies.extend(index.waypoint_policies(
            (self.snapshot, self.registry, self.mesh),
            (ns, labels, ns_labels),
            services,
        ));
        policies
    }

    /// Pods; remote clusters' only across networks (without it ztunnel knows the config
    /// cluster's, as istiod's single-cluster index).
    pub(super) fn pod_workloads(&self, index: &mut AmbientIndex, multi: &mut Option<MultiNetwork>) {
        let every_cluster = multi.is_some();
        let pods = self
            .snapshot
            .list(Kind::Pod)
            .filter(|e| every_cluster || e.config.metadata.cluster.is_empty());
        for entry in pods {
            let Spec::Pod(pod) = &entry.config.spec else {
                continue;
            };
            let meta = &entry.config.metadata;
            if !self.allowed(&meta.namespace) {
                continue;
            }
            let ns = self.ns_in(&meta.cluster, &meta.namespace);
            let Some(mut w) = pods::pod_workload(&entry.config, pod, &ns, self.registry, self.mesh)
            else {
                continue;
            };
            let ips: Vec<IpAddr> = w
                .addresses
                .iter()
                .filter_map(|a| ip_from_bytes(a))
                .collect();
            w.services = self.services_of(&meta.cluster, &ips);
            if let Some(node) = self.nodes.get(&(meta.cluster.as_str(), w.node.as_str())) {
                let text = crate::model::kubernetes::node_locality(Some(node), None);
                w.locality = (!text.is_empty()).then(|| locality(text));
            }
            w.authorization_policies = self.policies(
                index,
                (&meta.cluster, &meta.namespace, &meta.labels),
                &w.services,
            );
            index.admit(multi, w, !meta.cluster.is_empty());
        }
    }

    /// WorkloadEntries with an IP address.
    pub(super) fn workload_entry_workloads(
        &self,
        index: &mut AmbientIndex,
        multi: &mut Option<MultiNetwork>,
    ) {
        let mesh = self.mesh;
        for entry in self.snapshot.list(Kind::WorkloadEntry) {
            let Spec::WorkloadEntry(we) = &entry.config.spec else {
                continue;
            };
            let meta = &entry.config.metadata;
            if !self.allowed(&meta.namespace) {
                continue;
            }
            let Ok(ip) = we.address.parse::<IpAddr>() else {
                continue;
            };
            let ns = self.ns_in("", &meta.namespace);
            let labels = crate::model::workload::workload_entry_labels(meta, we);
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
                waypoint: workload_waypoint(&labels, &meta.namespace, self.registry, mesh),
                canonical_name,
                canonical_revision,
                workload_type: WorkloadType::Pod as i32,
                workload_name: meta.name.clone(),
                services: self.services_of("", &[ip]),
                status: WorkloadStatus::Healthy as i32,
                cluster_id: mesh.cluster_id.clone(),
                locality: (!we.locality.is_empty()).then(|| locality(we.locality.clone())),
                ..Default::default()
            };
            w.authorization_policies =
                self.policies(index, ("", &meta.namespace, &labels), &w.services);
            index.admit(multi, w, false);
        }
    }

    /// ServiceEntries' inline endpoints are workloads; a DNS ServiceEntry without endpoints is
    /// one workload per host, by hostname (istiod's `serviceEntryWorkloadBuilder`).
    pub(super) fn service_entry_workloads(
        &self,
        index: &mut AmbientIndex,
        multi: &mut Option<MultiNetwork>,
    ) {
        for entry in self.snapshot.list(Kind::ServiceEntry) {
            let Spec::ServiceEntry(se) = &entry.config.spec else {
                continue;
            };
            let meta = &entry.config.metadata;
            if !self.allowed(&meta.namespace) {
                continue;
            }
            let source = format!("ServiceEntry/{}/{}", meta.namespace, meta.name);
            let services: Vec<&Arc<crate::model::Service>> = self
                .registry
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
            let endpoints: Vec<(WorkloadEntry, Vec<&Arc<crate::model::Service>>)> = if implicit {
                services
                    .iter()
                    .map(|s| {
                        let by_name = WorkloadEntry {
                            address: s.hostname.clone(),
                            ..Default::default()
                        };
                        (by_name, vec![*s])
                    })
                    .collect()
            } else {
                se.endpoints
                    .iter()
                    .map(|e| (e.clone(), services.clone()))
                    .collect()
            };
            let root = &self.mesh.root_namespace;
            let policies = index.selected_policies(
                &meta.namespace,
                &meta.labels,
                root,
                peer_auth::workload_keys(&self.peer_auth, root, &meta.namespace, &meta.labels),
            );
            for (ep, services) in endpoints {
                let w = self.service_entry_workload(meta, implicit, &ep, &services, &policies);
                index.admit(multi, w, false);
            }
        }
    }

    /// One endpoint of ServiceEntry `meta`: its ports per service, its network (its own, else
    /// the namespace's, else the cluster's) and waypoint (none for the implicit per-host
    /// workloads).
    fn service_entry_workload(
        &self,
        meta: &ObjectMeta,
        implicit: bool,
        ep: &WorkloadEntry,
        services: &[&Arc<crate::model::Service>],
        policies: &[String],
    ) -> Workload {
        let mesh = self.mesh;
        let ns = self.ns_in("", &meta.namespace);
        let (canonical_name, canonical_revision) =
            crate::model::workload::canonical(&meta.labels, &meta.name);
        let ip = ep.address.parse::<IpAddr>().ok();
        let mut ports: BTreeMap<String, PortList> = BTreeMap::new();
        for svc in services {
            let list = ports
                .entry(format!("{}/{}", svc.namespace, svc.hostname))
                .or_default();
            for p in &svc.ports {
                let default_target = if p.target_port > 0 {
                    p.target_port
                } else {
                    p.number
                };
                list.ports.push(Port {
                    service_port: p.number,
                    target_port: ep.ports.get(&p.name).copied().unwrap_or(default_target),
                    app_protocol: app_protocol(p.protocol) as i32,
                });
            }
        }
        Workload {
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
                workload_waypoint(&ep.labels, &meta.namespace, self.registry, mesh)
            },
            canonical_name,
            canonical_revision,
            workload_type: WorkloadType::Pod as i32,
            workload_name: meta.name.clone(),
            services: ports,
            authorization_policies: policies.to_vec(),
            status: WorkloadStatus::Healthy as i32,
            cluster_id: mesh.cluster_id.clone(),
            locality: (!ep.locality.is_empty()).then(|| locality(ep.locality.clone())),
            capacity: (ep.weight > 0).then_some(ep.weight),
            ..Default::default()
        }
    }

    /// Every service the registry holds that ztunnel serves: the config cluster's, and across
    /// networks the global ones (with their VIPs in every cluster and the identities behind them).
    pub(super) fn services(&self, index: &mut AmbientIndex, multi: Option<&MultiNetwork>) {
        let (snapshot, registry, mesh) = (self.snapshot, self.registry, self.mesh);
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
            let served = match multi {
                Some(m) => m.serves(&key, local.is_some()),
                None => local.is_some(),
            };
            if !served {
                continue;
            }
            let labels = local
                .map(|e| e.config.metadata.labels.clone())
                .unwrap_or_default();
            let ns = self.ns_in("", &svc.namespace);
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
            if let Some(m) = multi.filter(|m| m.is_global(&key)) {
                // A Service's VIPs in every cluster that has it; a ServiceEntry is the config
                // cluster's alone.
                if kind == Kind::Service {
                    addresses = MultiNetwork::global_vips(
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
    }
}

/// Which service ports each (cluster, address) serves, from the registry's joined endpoints.
fn serving(registry: &Registry) -> Serving<'_> {
    let mut serving: Serving = HashMap::new();
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
                app_protocol: protocol.unwrap_or(super::pb::workload::AppProtocol::Unknown) as i32,
            };
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
    }
    serving
}

#[cfg(test)]
mod tests {
    use super::super::AmbientIndex;
    use crate::model::Registry;
    use crate::model::mesh::MeshSettings;

    /// A ServiceEntry's inline endpoints are workloads ztunnel can reach, with istiod's uids and the
    /// service's ports mapped through each endpoint's own; a DNS ServiceEntry without endpoints is
    /// one workload per host, by hostname.
    #[test]
    fn service_entry_endpoints_are_workloads() {
        let snapshot = crate::testing::store(
            "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: amb, labels: {app: db}}
spec:
  hosts: [db.example.internal]
  addresses: [240.0.0.9]
  ports: [{number: 5432, name: pg, protocol: TCP}]
  resolution: STATIC
  endpoints:
  - {address: 10.5.0.1, ports: {pg: 15432}, serviceAccount: db-sa, locality: r1/z1}
  - {address: 10.5.0.2, weight: 3}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: amb}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
    ",
        )
        .snapshot();
        let mesh = MeshSettings::default();
        let registry = Registry::build(&snapshot, &mesh.domain_suffix);
        let index = AmbientIndex::build(&snapshot, &registry, &mesh);
        let first = &index.workloads["Kubernetes/networking.istio.io/ServiceEntry/amb/db/10.5.0.1"];
        assert_eq!(first.name, "db");
        assert_eq!(first.service_account, "db-sa");
        assert_eq!(first.addresses, [vec![10, 5, 0, 1]]);
        let ports = &first.services["amb/db.example.internal"].ports;
        assert_eq!((ports[0].service_port, ports[0].target_port), (5432, 15432));
        assert_eq!(first.locality.as_ref().unwrap().zone, "z1");
        let second =
            &index.workloads["Kubernetes/networking.istio.io/ServiceEntry/amb/db/10.5.0.2"];
        assert_eq!(
            second.services["amb/db.example.internal"].ports[0].target_port,
            5432
        );
        assert_eq!(second.capacity, Some(3));
        let dns =
            &index.workloads["Kubernetes/networking.istio.io/ServiceEntry/amb/api/api.example.com"];
        assert_eq!(dns.hostname, "api.example.com");
        assert!(dns.addresses.is_empty());
        assert!(dns.services.contains_key("amb/api.example.com"));
    }
}

//! The registry of services and endpoints, built from a snapshot and then kept up to date by
//! rebuilding only the hostnames a change can touch.
//!
//! Each hostname's service and endpoints are a function of a few objects: the Kubernetes Service of
//! that name or the oldest-named ServiceEntry listing it, that Service's EndpointSlices with the
//! pods and nodes they name, or the WorkloadEntries and pods a ServiceEntry's `workloadSelector`
//! selects in its namespace. The registry keeps the indexes that lead from a changed object back to
//! the hostnames it feeds; an update finds the changed objects by diffing two store snapshots (the
//! store's persistent maps skip what they share), and recomputes those hostnames alone. The maps are
//! persistent too, so the registry of the previous push is kept at no cost while the next is built.

use super::kubernetes;
use super::network::ClusterNetworks;
use super::service::{Built, Endpoint, Protocol, Service, ServicePort, resolve_host};
use crate::config::networking::{ServiceEntry, WorkloadEntry};
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

type Key = (String, String);

/// Services and endpoints at one moment.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// hostname → service. When two ServiceEntries claim a host, the older-named one (by namespace/name)
    /// wins, so the choice is stable.
    pub services: imbl::OrdMap<String, Arc<Service>>,
    /// (hostname, service port) → endpoints, sorted.
    pub endpoints: imbl::OrdMap<(String, u32), Arc<Vec<Endpoint>>>,
    /// Endpoint address → (hostname, service port, endpoint port) of every endpoint there: what a
    /// proxy at that address serves inbound, found without a scan of every endpoint.
    pub by_address: imbl::OrdMap<String, imbl::OrdSet<(String, u32, u32)>>,
    /// ServiceEntry hosts dropped because another service already has the hostname (istiod's
    /// `pilot_duplicate_envoy_clusters` counts the clusters they would have made).
    pub duplicate_hosts: usize,
    /// Service ports without any endpoint (`pilot_eds_no_instances`).
    empty_ports: usize,
    index: Index,
}

/// What leads from a changed object to the hostnames it feeds, and the settings the registry was
/// built under (an update under other settings rebuilds).
#[derive(Debug, Default, Clone)]
struct Index {
    domain_suffix: String,
    selectors: Vec<LabelSelector>,
    networks: ClusterNetworks,
    /// hostname → the ServiceEntries listing it, by (namespace, name), with how many times each
    /// lists it. The first wins unless a Kubernetes Service has the name.
    claims: imbl::OrdMap<String, imbl::OrdMap<Key, usize>>,
    /// Kubernetes Service (namespace, name) → the (cluster, name) of its EndpointSlices in every
    /// cluster.
    slices: imbl::OrdMap<Key, imbl::OrdSet<(String, String)>>,
    /// (pod namespace, pod name, cluster, slice namespace, slice name) for every pod an
    /// EndpointSlice points at (pod and slice of one cluster): a pod's labels, service account
    /// and node are its endpoints'.
    pod_refs: imbl::OrdSet<(String, String, String, String, String)>,
}

/// What an update changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RegistryDelta {
    /// Hostnames whose endpoints differ (ports added or removed included).
    pub eds_hosts: BTreeSet<String>,
    /// Whether any service itself (not only its endpoints) differs.
    pub services_changed: bool,
}

impl Registry {
    /// Kubernetes services first, then ServiceEntries (a ServiceEntry cannot take over a Kubernetes
    /// service's hostname).
    pub fn build(snapshot: &Snapshot, domain_suffix: &str) -> Registry {
        Registry::build_with(snapshot, domain_suffix, &[], &ClusterNetworks::default())
    }

    /// `selectors` are MeshConfig discoverySelectors; `networks` place the endpoints whose
    /// workloads name no network.
    pub fn build_with(
        snapshot: &Snapshot,
        domain_suffix: &str,
        selectors: &[LabelSelector],
        networks: &ClusterNetworks,
    ) -> Registry {
        let mut reg = Registry {
            index: Index {
                domain_suffix: domain_suffix.to_string(),
                selectors: selectors.to_vec(),
                networks: networks.clone(),
                ..Index::default()
            },
            ..Registry::default()
        };
        for entry in snapshot.list(Kind::ServiceEntry) {
            reg.index.claim(&entry.config, domain_suffix, 1);
        }
        for entry in snapshot.list(Kind::EndpointSlice) {
            reg.index.add_slice(&entry.config);
        }
        let mut hosts: BTreeSet<String> = reg.index.claims.keys().cloned().collect();
        hosts.extend(snapshot.list(Kind::Service).map(|e| {
            kubernetes::service_hostname(
                &e.config.metadata.namespace,
                &e.config.metadata.name,
                domain_suffix,
            )
        }));
        let mut build = HostBuilder::new(snapshot, &reg.index);
        let built: Vec<(String, Option<Built>)> = hosts
            .into_iter()
            .map(|h| {
                let b = build.host(&h);
                (h, b)
            })
            .collect();
        for (host, b) in built {
            reg.put(&host, b);
            reg.add_share(&host);
        }
        reg
    }

    /// The registry for `new`, from this one built for `old`: only hostnames fed by objects that
    /// differ between the two snapshots are recomputed. Changes of discovery selectors, the domain
    /// suffix, the networks, namespaces (when selectors are set) or nodes rebuild it whole, and so
    /// does an `old` older than the store's change log reaches.
    pub fn update(
        &self,
        old: &Snapshot,
        new: &Snapshot,
        domain_suffix: &str,
        selectors: &[LabelSelector],
        networks: &ClusterNetworks,
    ) -> (Registry, RegistryDelta) {
        let changes = new.changes_since(old).filter(|c| {
            self.index.domain_suffix == domain_suffix
                && self.index.selectors == selectors
                && self.index.networks == *networks
                && !c.contains_key(&Kind::Node)
                && (selectors.is_empty() || !c.contains_key(&Kind::Namespace))
        });
        let Some(mut changes) = changes else {
            let next = Registry::build_with(new, domain_suffix, selectors, networks);
            let delta = self.delta(&next);
            return (next, delta);
        };
        let mut take = |kind: Kind| changes.remove(&kind).unwrap_or_default();
        let mut next = self.clone();
        let mut hosts: BTreeSet<String> = BTreeSet::new();
        let get = |s: &'_ Snapshot, kind: Kind, (ns, name): &Key| {
            s.get_named(kind, ns, name).map(|e| e.config.clone())
        };
        // Kubernetes objects of one name in every cluster.
        let get_all = |s: &'_ Snapshot, kind: Kind, (ns, name): &Key| -> Vec<Arc<Config>> {
            s.get_all_clusters(kind, ns, name)
                .map(|e| e.config.clone())
                .collect()
        };
        for key in take(Kind::ServiceEntry) {
            for (snapshot, weight) in [(old, -1), (new, 1)] {
                if let Some(config) = get(snapshot, Kind::ServiceEntry, &key) {
                    hosts.extend(entry_hosts(&config, domain_suffix));
                    next.index.claim(&config, domain_suffix, weight);
                }
            }
        }
        for key in take(Kind::EndpointSlice) {
            for config in get_all(old, Kind::EndpointSlice, &key) {
                next.index.remove_slice(&config);
                hosts.extend(slice_host(&config, domain_suffix));
            }
            for config in get_all(new, Kind::EndpointSlice, &key) {
                next.index.add_slice(&config);
                hosts.extend(slice_host(&config, domain_suffix));
            }
        }
        for (ns, name) in take(Kind::Service) {
            hosts.insert(kubernetes::service_hostname(&ns, &name, domain_suffix));
        }
        for kind in [Kind::WorkloadEntry, Kind::Pod] {
            for key in take(kind) {
                let labels: Vec<BTreeMap<String, String>> = [old, new]
                    .into_iter()
                    .flat_map(|s| get_all(s, kind, &key))
                    .map(|c| workload_labels(&c))
                    .collect();
                hosts.extend(selecting_hosts(
                    new,
                    &key.0,
                    &labels,
                    domain_suffix,
                    kind == Kind::WorkloadEntry,
                ));
                if kind == Kind::Pod {
                    hosts.extend(next.index.slices_of_pod(&key).filter_map(
                        |(cluster, ns, name)| {
                            let e = new.get_in(Kind::EndpointSlice, &cluster, &ns, &name)?;
                            slice_host(&e.config, domain_suffix)
                        },
                    ));
                }
            }
        }
        for host in &hosts {
            let (empty, duplicates) = self.share(host);
            next.empty_ports -= empty;
            next.duplicate_hosts -= duplicates;
        }
        let mut build = HostBuilder::new(new, &next.index);
        let built: Vec<(&String, Option<Built>)> =
            hosts.iter().map(|h| (h, build.host(h))).collect();
        let mut delta = RegistryDelta::default();
        for (host, b) in built {
            let before = self.host_endpoints(host);
            next.put(host, b);
            next.add_share(host);
            if before != next.host_endpoints(host) {
                delta.eds_hosts.insert(host.clone());
            }
            if self.services.get(host) != next.services.get(host) {
                delta.services_changed = true;
            }
        }
        (next, delta)
    }

    /// What differs between this registry and `other`, found by comparing them whole.
    pub fn delta(&self, other: &Registry) -> RegistryDelta {
        RegistryDelta {
            eds_hosts: self.changed_endpoints(other),
            services_changed: !self.same_services(other),
        }
    }

    /// Replaces a hostname's service and endpoints.
    fn put(&mut self, host: &str, built: Option<Built>) {
        if let Some(old) = self.services.remove(host) {
            for port in &old.ports {
                let Some(eps) = self.endpoints.remove(&(host.to_string(), port.number)) else {
                    continue;
                };
                for e in eps.iter() {
                    if let Some(at) = self.by_address.get_mut(&e.address) {
                        at.remove(&(host.to_string(), port.number, e.port));
                        if at.is_empty() {
                            self.by_address.remove(&e.address);
                        }
                    }
                }
            }
        }
        if let Some((service, endpoints)) = built {
            for (port, eps) in endpoints {
                for e in &eps {
                    self.by_address
                        .entry(e.address.clone())
                        .or_default()
                        .insert((host.to_string(), port, e.port));
                }
                self.endpoints
                    .insert((host.to_string(), port), Arc::new(eps));
            }
            self.services.insert(host.to_string(), Arc::new(service));
        }
    }

    /// A hostname's share of the counters: its ports without endpoints, and the ServiceEntry
    /// claims on it that lost.
    fn share(&self, host: &str) -> (usize, usize) {
        let service = self.services.get(host);
        let empty = service.map_or(0, |svc| {
            svc.ports
                .iter()
                .filter(|p| self.endpoints(host, p.number).is_empty())
                .count()
        });
        let claims: usize = self.index.claims.get(host).map_or(0, |c| c.values().sum());
        let won = service.is_some_and(|s| s.source.starts_with("ServiceEntry/"));
        (empty, claims.saturating_sub(usize::from(won)))
    }

    fn add_share(&mut self, host: &str) {
        let (empty, duplicates) = self.share(host);
        self.empty_ports += empty;
        self.duplicate_hosts += duplicates;
    }

    /// A hostname's endpoints, port by port.
    fn host_endpoints(&self, host: &str) -> Vec<(u32, Arc<Vec<Endpoint>>)> {
        self.endpoints
            .range((host.to_string(), 0)..=(host.to_string(), u32::MAX))
            .map(|((_, port), eps)| (*port, eps.clone()))
            .collect()
    }

    /// Service ports with no endpoint at all (`pilot_eds_no_instances`).
    pub fn ports_without_endpoints(&self) -> usize {
        self.empty_ports
    }

    /// Whether an endpoint of some service is at `address` and, if so, whether every one there is
    /// ready: what istiod reports of a proxy's own pod (`pilot_no_ip`, `pilot_endpoint_not_ready`).
    pub fn endpoint_readiness(&self, address: &str) -> Option<bool> {
        let at = self.by_address.get(address)?;
        Some(at.iter().all(|(host, port, _)| {
            self.endpoints(host, *port)
                .iter()
                .filter(|e| e.address == address)
                .all(|e| e.healthy)
        }))
    }

    pub fn endpoints(&self, hostname: &str, port: u32) -> &[Endpoint] {
        self.endpoints
            .get(&(hostname.to_string(), port))
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }

    /// Services whose endpoints differ between `self` and `other` (for EDS-only pushes).
    pub fn changed_endpoints(&self, other: &Registry) -> BTreeSet<String> {
        // Both maps are ordered by the same key: walk them side by side. (Not imbl's `diff`,
        // which skips shared subtrees and was found to miss changes.)
        use std::cmp::Ordering;
        let mut out = BTreeSet::new();
        let mut old = self.endpoints.iter().peekable();
        let mut new = other.endpoints.iter().peekable();
        loop {
            let order = match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((a, _)), Some((b, _))) => a.cmp(b),
            };
            match order {
                Ordering::Less => {
                    if let Some(((host, _), _)) = old.next() {
                        out.insert(host.clone());
                    }
                }
                Ordering::Greater => {
                    if let Some(((host, _), _)) = new.next() {
                        out.insert(host.clone());
                    }
                }
                Ordering::Equal => {
                    if let (Some(((host, _), a)), Some((_, b))) = (old.next(), new.next())
                        && a != b
                    {
                        out.insert(host.clone());
                    }
                }
            }
        }
        out
    }

    /// True when the services themselves (not their endpoints) are identical.
    pub fn same_services(&self, other: &Registry) -> bool {
        self.services.len() == other.services.len()
            && self
                .services
                .iter()
                .zip(other.services.iter())
                .all(|((h1, a), (h2, b))| h1 == h2 && (Arc::ptr_eq(a, b) || a == b))
    }
}

impl Index {
    /// Adds (`weight` 1) or takes away (-1) a ServiceEntry's claims on its hostnames.
    fn claim(&mut self, config: &Config, domain_suffix: &str, weight: isize) {
        let key = (
            config.metadata.namespace.clone(),
            config.metadata.name.clone(),
        );
        for host in entry_hosts(config, domain_suffix) {
            let mut by = self.claims.get(&host).cloned().unwrap_or_default();
            let n = by
                .get(&key)
                .copied()
                .unwrap_or(0)
                .saturating_add_signed(weight);
            if n == 0 {
                by.remove(&key);
            } else {
                by.insert(key.clone(), n);
            }
            if by.is_empty() {
                self.claims.remove(&host);
            } else {
                self.claims.insert(host, by);
            }
        }
    }

    fn add_slice(&mut self, config: &Config) {
        let ns = &config.metadata.namespace;
        let Some(service) = kubernetes::slice_service(config) else {
            return;
        };
        let key = (ns.clone(), service.to_string());
        let cluster = &config.metadata.cluster;
        let mut names = self.slices.get(&key).cloned().unwrap_or_default();
        names.insert((cluster.clone(), config.metadata.name.clone()));
        self.slices.insert(key, names);
        for (pod_ns, pod) in kubernetes::slice_pods(config) {
            self.pod_refs.insert((
                pod_ns,
                pod,
                cluster.clone(),
                ns.clone(),
                config.metadata.name.clone(),
            ));
        }
    }

    fn remove_slice(&mut self, config: &Config) {
        let ns = &config.metadata.namespace;
        if let Some(service) = kubernetes::slice_service(config) {
            let key = (ns.clone(), service.to_string());
            if let Some(mut names) = self.slices.get(&key).cloned() {
                names.remove(&(
                    config.metadata.cluster.clone(),
                    config.metadata.name.clone(),
                ));
                if names.is_empty() {
                    self.slices.remove(&key);
                } else {
                    self.slices.insert(key, names);
                }
            }
        }
        for (pod_ns, pod) in kubernetes::slice_pods(config) {
            self.pod_refs.remove(&(
                pod_ns,
                pod,
                config.metadata.cluster.clone(),
                ns.clone(),
                config.metadata.name.clone(),
            ));
        }
    }

    /// The EndpointSlices, as (cluster, namespace, name), that point at a pod of that name in
    /// their cluster.
    fn slices_of_pod<'a>(
        &'a self,
        (ns, name): &'a Key,
    ) -> impl Iterator<Item = (String, String, String)> + 'a {
        let from = (
            ns.clone(),
            name.clone(),
            String::new(),
            String::new(),
            String::new(),
        );
        self.pod_refs
            .range(from..)
            .take_while(move |(n, p, _, _, _)| n == ns && p == name)
            .map(|(_, _, cluster, slice_ns, slice)| {
                (cluster.clone(), slice_ns.clone(), slice.clone())
            })
    }
}

/// The hostnames a ServiceEntry lists, resolved.
fn entry_hosts(config: &Config, domain_suffix: &str) -> Vec<String> {
    match &config.spec {
        Spec::ServiceEntry(se) => se
            .hosts
            .iter()
            .map(|h| resolve_host(h, &config.metadata.namespace, domain_suffix))
            .collect(),
        _ => Vec::new(),
    }
}

/// The hostname of the Service an EndpointSlice belongs to.
fn slice_host(config: &Config, domain_suffix: &str) -> Option<String> {
    kubernetes::slice_service(config)
        .map(|svc| kubernetes::service_hostname(&config.metadata.namespace, svc, domain_suffix))
}

/// Hostnames of the ServiceEntries in `ns` whose `workloadSelector` selects any of `labels`.
/// The hosts whose endpoints a workload with `labels` (before and after a change) may be among:
/// ServiceEntries selecting it and, for a WorkloadEntry (`entry`), Kubernetes Services too (pods
/// reach those through their EndpointSlices).
fn selecting_hosts(
    snapshot: &Snapshot,
    ns: &str,
    labels: &[BTreeMap<String, String>],
    domain_suffix: &str,
    entry: bool,
) -> Vec<String> {
    let services = snapshot
        .list_namespace(Kind::Service, ns)
        .filter(|_| entry)
        .filter(|e| {
            let selector = kubernetes::service_selector(&e.config);
            !selector.is_empty() && labels.iter().any(|l| selects(&selector, l))
        })
        .map(|e| kubernetes::service_hostname(ns, &e.config.metadata.name, domain_suffix));
    let entries = snapshot
        .list_namespace(Kind::ServiceEntry, ns)
        .filter(|e| match &e.config.spec {
            Spec::ServiceEntry(se) => se
                .workload_selector
                .as_ref()
                .is_some_and(|sel| labels.iter().any(|l| selects(&sel.labels, l))),
            _ => false,
        })
        .flat_map(|e| entry_hosts(&e.config, domain_suffix));
    services.chain(entries).collect()
}

/// The labels a `workloadSelector` matches: a WorkloadEntry's own, a pod's metadata labels.
fn workload_labels(config: &Config) -> BTreeMap<String, String> {
    match &config.spec {
        Spec::WorkloadEntry(we) => we.labels.clone(),
        _ => config.metadata.labels.clone(),
    }
}

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    crate::config::mesh::labels_match(selector, labels)
}

/// Computes hostnames from one snapshot and index, with what several hostnames share (a
/// namespace's workloads) read once.
struct HostBuilder<'a> {
    snapshot: &'a Snapshot,
    index: &'a Index,
    admitted: Option<BTreeSet<String>>,
    workloads: HashMap<String, Arc<Vec<Selected>>>,
}

impl<'a> HostBuilder<'a> {
    fn new(snapshot: &'a Snapshot, index: &'a Index) -> HostBuilder<'a> {
        HostBuilder {
            snapshot,
            index,
            admitted: kubernetes::namespace_filter(snapshot, &index.selectors),
            workloads: HashMap::new(),
        }
    }

    /// The service at `host` with its endpoints: the Kubernetes Service of that name when there is
    /// one in a discovered namespace, else the first ServiceEntry (by namespace, then name) that
    /// lists it.
    fn host(&mut self, host: &str) -> Option<Built> {
        self.kubernetes(host).or_else(|| {
            let (ns, name) = self.index.claims.get(host)?.keys().next()?;
            let config = self
                .snapshot
                .get_named(Kind::ServiceEntry, ns, name)?
                .config
                .clone();
            let Spec::ServiceEntry(se) = &config.spec else {
                return None;
            };
            Some(self.service_entry(&config, se, host))
        })
    }

    /// A Kubernetes Service's hostname, merged across the clusters that have it (istiod's
    /// aggregate registry): the service as the first cluster has it (the config cluster first),
    /// the endpoints of every cluster's Service from that cluster's EndpointSlices and pods.
    fn kubernetes(&self, host: &str) -> Option<Built> {
        let (ns, name) = kubernetes::service_of_hostname(host, &self.index.domain_suffix)?;
        if self.admitted.as_ref().is_some_and(|set| !set.contains(&ns)) {
            return None;
        }
        let slice_names = self.index.slices.get(&(ns.clone(), name.clone()));
        let mut merged: Option<Built> = None;
        let mut first_entry: Option<Arc<Config>> = None;
        for entry in self.snapshot.get_all_clusters(Kind::Service, &ns, &name) {
            let cluster = &entry.config.metadata.cluster;
            let slices: Vec<&k8s_openapi::api::discovery::v1::EndpointSlice> = slice_names
                .into_iter()
                .flatten()
                .filter(|(c, _)| c == cluster)
                .filter_map(|(c, slice)| {
                    match &self
                        .snapshot
                        .get_in(Kind::EndpointSlice, c, &ns, slice)?
                        .config
                        .spec
                    {
                        Spec::EndpointSlice(s) => Some(s.as_ref()),
                        _ => None,
                    }
                })
                .collect();
            let Some((service, endpoints)) = kubernetes::kubernetes_service(
                self.snapshot,
                &entry.config,
                &slices,
                &self.index.domain_suffix,
                &self.index.networks,
            ) else {
                continue;
            };
            match &mut merged {
                None => {
                    first_entry = Some(entry.config.clone());
                    merged = Some((service, endpoints));
                }
                Some((first, all)) => {
                    // Another cluster's endpoints count on the ports the first one declares.
                    for (port, eps) in endpoints {
                        if let Some((_, into)) = all.iter_mut().find(|(p, _)| *p == port) {
                            into.extend(eps);
                        }
                    }
                    for address in service.addresses {
                        if !first.addresses.contains(&address) {
                            first.addresses.push(address);
                        }
                    }
                }
            }
        }
        let (service, mut endpoints) = merged?;
        let entry = first_entry?;
        for (_, eps) in &mut endpoints {
            eps.sort();
            eps.dedup();
        }
        // As istiod, a Service's selector also selects the WorkloadEntries of its namespace (VMs
        // behind a Kubernetes Service); pods come through the EndpointSlices.
        let selector = kubernetes::service_selector(&entry);
        if !selector.is_empty() {
            let entries: Vec<Selected> = self
                .snapshot
                .list_namespace(Kind::WorkloadEntry, &ns)
                .filter_map(|e| Selected::workload_entry(&e.config))
                .filter(|w| !w.entry.address.is_empty() && selects(&selector, &w.entry.labels))
                .collect();
            for (port, eps) in &mut endpoints {
                let Some(sp) = service.port(*port) else {
                    continue;
                };
                eps.extend(entries.iter().map(|w| w.endpoint(sp, &ns)));
                eps.sort();
                eps.dedup();
            }
        }
        Some((service, endpoints))
    }

    fn service_entry(&mut self, config: &Config, se: &ServiceEntry, host: &str) -> Built {
        let ns = &config.metadata.namespace;
        let source = format!("ServiceEntry/{ns}/{}", config.metadata.name);
        let mut service = service_from_entry(se, host, ns, &source);
        service.labels.clone_from(&config.metadata.labels);
        if se.auto_allocates(&config.metadata.labels) {
            service.auto_allocated = allocated_addresses(config, host);
        }
        let workloads = se.workload_selector.as_ref().map(|_| self.workloads_in(ns));
        let endpoints = service
            .ports
            .iter()
            .map(|port| {
                let workloads = workloads.as_deref().map(Vec::as_slice);
                let eps = endpoints_for(config, se, port, workloads);
                (port.number, eps)
            })
            .collect();
        (service, endpoints)
    }

    /// The WorkloadEntries and running pods of a namespace, each with whether it is ready.
    fn workloads_in(&mut self, ns: &str) -> Arc<Vec<Selected>> {
        if let Some(found) = self.workloads.get(ns) {
            return found.clone();
        }
        let snapshot = self.snapshot;
        let entries = snapshot
            .list_namespace(Kind::WorkloadEntry, ns)
            .filter_map(|e| Selected::workload_entry(&e.config));
        let pods = snapshot.list_namespace(Kind::Pod, ns).filter_map(|e| {
            let (entry, workload, ready) =
                kubernetes::pod_workload(snapshot, &e.config, &self.index.networks)?;
            Some(Selected {
                entry,
                workload,
                ready,
            })
        });
        let found: Arc<Vec<_>> = Arc::new(entries.chain(pods).collect());
        self.workloads.insert(ns.to_string(), found.clone());
        found
    }
}

/// The addresses the leader allocated to `host` (`status.addresses`, istiod's IP
/// auto-allocation): the service's VIPs when the ServiceEntry has none of its own.
pub fn allocated_addresses(config: &Config, host: &str) -> Vec<String> {
    config
        .status_addresses()
        .iter()
        .filter(|a| a["host"] == host)
        .filter_map(|a| a["value"].as_str())
        .filter(|v| v.parse::<std::net::IpAddr>().is_ok())
        .map(str::to_string)
        .collect()
}

fn service_from_entry(se: &ServiceEntry, hostname: &str, ns: &str, source: &str) -> Service {
    Service {
        hostname: hostname.to_string(),
        namespace: ns.to_string(),
        ports: se
            .ports
            .iter()
            .map(|p| ServicePort {
                name: p.name.clone(),
                number: p.number,
                protocol: Protocol::parse(&p.protocol),
                target_port: p.target_port,
            })
            .collect(),
        addresses: se.addresses.clone(),
        auto_allocated: Vec::new(),
        resolution: se.resolution,
        location: se.location,
        export_to: se.export_to.clone(),
        source: source.to_string(),
        subject_alt_names: se.subject_alt_names.clone(),
        labels: BTreeMap::new(),
    }
}

/// A workload an endpoint is made of: a WorkloadEntry (an object, a ServiceEntry's inline
/// endpoint, or a pod a `workloadSelector` selects), the workload it belongs to, and whether it is
/// ready.
#[derive(Debug, Clone)]
struct Selected {
    entry: WorkloadEntry,
    workload: String,
    ready: bool,
}

impl Selected {
    fn workload_entry(config: &Config) -> Option<Selected> {
        let Spec::WorkloadEntry(entry) = &config.spec else {
            return None;
        };
        let meta = &config.metadata;
        Some(Selected {
            workload: crate::model::workload::of_workload_entry(
                &meta.name,
                &meta.annotations,
                &entry.labels,
            ),
            entry: entry.clone(),
            ready: true,
        })
    }

    /// The endpoint on `port` of this workload of `namespace`.
    fn endpoint(&self, port: &ServicePort, namespace: &str) -> Endpoint {
        let we = &self.entry;
        let number = we
            .ports
            .get(&port.name)
            .copied()
            .unwrap_or(if port.target_port != 0 {
                port.target_port
            } else {
                port.number
            });
        Endpoint {
            address: we.address.clone(),
            port: number,
            labels: we.labels.clone(),
            locality: we.locality.clone(),
            weight: if we.weight == 0 { 1 } else { we.weight },
            service_account: we.service_account.clone(),
            network: we.network.clone(),
            cluster: String::new(),
            healthy: self.ready,
            workload: self.workload.clone(),
            namespace: namespace.to_string(),
        }
    }
}

/// A ServiceEntry's endpoints on `port`: its own (istiod names the workload of the `i`th
/// `<entry>-<i>`), or the workloads of its namespace that its `workloadSelector` selects.
fn endpoints_for(
    config: &Config,
    se: &ServiceEntry,
    port: &ServicePort,
    workloads: Option<&[Selected]>,
) -> Vec<Endpoint> {
    let ns = &config.metadata.namespace;
    let mut eps: Vec<Endpoint> = match (&se.workload_selector, workloads) {
        (Some(selector), Some(workloads)) => workloads
            .iter()
            .filter(|w| !w.entry.address.is_empty() && selects(&selector.labels, &w.entry.labels))
            .map(|w| w.endpoint(port, ns))
            .collect(),
        _ => se
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, we)| {
                let name = format!("{}-{i}", config.metadata.name);
                Selected {
                    workload: crate::model::workload::of_workload_entry(
                        &name,
                        &BTreeMap::new(),
                        &we.labels,
                    ),
                    entry: we.clone(),
                    ready: true,
                }
                .endpoint(port, ns)
            })
            .collect(),
    };
    eps.sort();
    eps.dedup();
    eps
}

#[cfg(test)]
mod tests;

//! The push context: an immutable, indexed view of config and services for one push version, and the
//! cache that makes every generated resource built once per scope instead of once per proxy.

use super::proxy::{Proxy, ProxyType};
use super::resource::{Resource, Resources};
use super::types::TypeUrl;
use crate::config::networking::Sidecar;
use crate::config::{Config, Kind, Spec, host};
use crate::model::identity::WorkloadCertificates;
use crate::model::mesh::MeshSettings;
use crate::model::origin::Origin;
use crate::model::policy::Workload;
use crate::model::{Protocol, Registry, Service};
use crate::store::Snapshot;
use std::any::{Any, TypeId};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};

mod built;
mod destination_rules;
mod memo;
mod routing;
mod scope;
mod stream_caches;
use built::BuiltCache;
pub use built::{CacheReads, Reads};
pub use destination_rules::DrEntry;
use memo::lock;
use routing::exported_to;
pub use routing::{GatewayVsEntry, Routing, VsEntry, gateway_key};
use scope::egress_allows;
pub use scope::{Role, ScopeInputs, ScopeView};
pub use stream_caches::{ChangedHosts, StreamCaches, SubscribedNames};

/// What `PushContext::conflicts` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Conflicts {
    pub duplicate_domains: usize,
    pub duplicate_subsets: usize,
}

/// The node metadata keys EnvoyFilter `proxy.metadata` matches name, across the context.
struct MatchedMetadataKeys(std::collections::BTreeSet<String>);

/// One derived index, built at most once.
type DerivedSlot = Arc<OnceLock<Arc<dyn Any + Send + Sync>>>;

/// Proxy views by scope key. A push that changes only endpoints keeps its predecessor's: what a
/// view holds (the services in scope, the Sidecar) is then the same, and what does depend on
/// endpoints (the ports served at the proxy's address) is part of the key.
pub type ScopeCache = Arc<Mutex<HashMap<u64, Arc<ScopeView>>>>;

/// Signs the workload certificates a push context serves over SDS (none: the CA is not running).
pub type Certificates = Option<Arc<dyn WorkloadCertificates>>;

/// Hostnames removed from the registry within `REMOVED_HOSTS_KEPT` (at most
/// `REMOVED_HOSTS_MAX`, the oldest dropped first), with when: the push loop records each push's
/// removals, every context shares the record.
#[derive(Debug, Default, Clone)]
pub struct RemovedHosts {
    at: HashMap<String, std::time::Instant>,
}

/// How long a removed hostname's names count as known: a proxy follows a deletion within its
/// next push, so this is far longer than any proxy lags behind.
const REMOVED_HOSTS_KEPT: std::time::Duration = std::time::Duration::from_secs(600);
/// Bounds the record whatever the churn (a deletion of more services than this at once keeps the
/// newest).
const REMOVED_HOSTS_MAX: usize = 200_000;

impl RemovedHosts {
    /// This record with `removed` added now and what has aged out dropped.
    pub fn with(&self, removed: impl IntoIterator<Item = String>) -> RemovedHosts {
        let now = std::time::Instant::now();
        let mut at = self.at.clone();
        at.retain(|_, t| now.duration_since(*t) < REMOVED_HOSTS_KEPT);
        for host in removed {
            at.insert(host, now);
        }
        if at.len() > REMOVED_HOSTS_MAX {
            let mut by_age: Vec<(String, std::time::Instant)> = at.into_iter().collect();
            by_age.sort_by_key(|entry| std::cmp::Reverse(entry.1));
            by_age.truncate(REMOVED_HOSTS_MAX);
            at = by_age.into_iter().collect();
        }
        RemovedHosts { at }
    }

    pub fn contains(&self, host: &str) -> bool {
        self.at.contains_key(host)
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

pub struct PushContext {
    pub version: u64,
    pub snapshot: Arc<Snapshot>,
    pub registry: Arc<Registry>,
    pub mesh: MeshSettings,
    /// VirtualServices and DestinationRules, indexed; shared with the previous context when
    /// neither kind changed, so an endpoint push does not re-read every route.
    pub routing: Arc<Routing>,
    /// Built resources, and those kept from the push before (`keeping`).
    cache: BuiltCache,
    /// Proxies whose pod port two services of different protocols select, met while deriving
    /// their scopes (istiod's `pilot_conflict_inbound_listener`).
    inbound_conflicts: Mutex<HashSet<String>>,
    scopes: ScopeCache,
    /// Signs workload certificates served over SDS (`default`); none when the CA is not running.
    pub certificates: Certificates,
    /// Hostnames removed from the registry lately (`RemovedHosts`): a proxy still subscribed to
    /// their clusters after a mass deletion is behind, not making names up.
    pub removed_hosts: Arc<RemovedHosts>,
    /// Indexes derived from this context by the generators that need them (the ambient view), built
    /// on first use, at most once, and shared for the life of the push.
    derived: Mutex<HashMap<TypeId, DerivedSlot>>,
    /// What the stream layer keeps for this push (shared encodings and lists): its own type, with
    /// this context's lifetime.
    pub streams: StreamCaches,
}

/// What a push context was built from, kept after its push so `/debug` can show a proxy's config
/// as an earlier push made it: the objects are shared with later contexts (the store and registry
/// are persistent maps), the caches are not kept. Workload certificates are left out: a past
/// view never signs one.
#[derive(Clone)]
pub struct PushInputs {
    pub version: u64,
    pub snapshot: Arc<Snapshot>,
    pub registry: Arc<Registry>,
    pub mesh: MeshSettings,
    pub routing: Arc<Routing>,
    pub removed_hosts: Arc<RemovedHosts>,
}

impl PushInputs {
    /// A context for these inputs, with caches of its own.
    pub fn context(&self) -> PushContext {
        PushContext::with_routing(
            self.version,
            self.snapshot.clone(),
            self.registry.clone(),
            self.mesh.clone(),
            self.routing.clone(),
        )
        .with_removed_hosts(self.removed_hosts.clone())
    }
}

impl PushContext {
    /// What this context was built from (`PushInputs`).
    pub fn inputs(&self) -> PushInputs {
        PushInputs {
            version: self.version,
            snapshot: self.snapshot.clone(),
            registry: self.registry.clone(),
            mesh: self.mesh.clone(),
            routing: self.routing.clone(),
            removed_hosts: self.removed_hosts.clone(),
        }
    }

    pub fn new(
        version: u64,
        snapshot: Arc<Snapshot>,
        registry: Arc<Registry>,
        mesh: MeshSettings,
    ) -> PushContext {
        let routing = Arc::new(Routing::build(&snapshot, &mesh));
        PushContext::with_routing(version, snapshot, registry, mesh, routing)
    }

    /// A context whose routing index was built (or kept) by the caller: it must be the one for
    /// `snapshot` and `mesh` (`Routing::reuse_or_build`).
    pub fn with_routing(
        version: u64,
        snapshot: Arc<Snapshot>,
        registry: Arc<Registry>,
        mesh: MeshSettings,
        routing: Arc<Routing>,
    ) -> PushContext {
        PushContext {
            version,
            snapshot,
            registry,
            mesh,
            routing,
            cache: BuiltCache::default(),
            inbound_conflicts: Mutex::default(),
            scopes: ScopeCache::default(),
            certificates: None,
            removed_hosts: Arc::default(),
            derived: Mutex::default(),
            streams: StreamCaches::default(),
        }
    }

    /// This context with `previous`'s proxy views: only for a push that changes nothing but
    /// endpoints since the context `previous` came from (`ScopeCache`).
    pub fn sharing_scopes(mut self, previous: &ScopeCache) -> PushContext {
        self.scopes = previous.clone();
        self
    }

    /// The proxy views of this context, for the next one to share.
    pub fn scope_cache(&self) -> ScopeCache {
        self.scopes.clone()
    }

    /// The Sidecar resource that applies to `proxy`: one selecting its labels, else its namespace's
    /// default, else the root namespace's default.
    fn sidecar_for(&self, proxy: &Proxy) -> Option<Arc<Config>> {
        let workload = Workload {
            namespace: &proxy.namespace,
            labels: &proxy.labels,
            waypoint: false,
            service: None,
        };
        crate::model::policy::sidecar(&self.snapshot, &self.mesh.root_namespace, &workload).cloned()
    }

    /// The workload certificates every proxy of this context is served.
    /// The conflicts istiod counts in gauges: hosts that more than one mesh VirtualService claims
    /// (the oldest wins; `pilot_vservice_dup_domain`), and subset names repeated among the
    /// DestinationRules of one host in one namespace (`pilot_destrule_subsets`).
    pub fn conflicts(&self) -> Conflicts {
        let duplicate_domains = self
            .routing
            .vs_by_host
            .values()
            .filter(|v| v.len() > 1)
            .count();
        let mut subsets: HashMap<(&str, &str, &str), usize> = HashMap::new();
        for dr in &self.routing.destination_rules {
            for subset in &dr.spec.subsets {
                *subsets
                    .entry((
                        dr.config.metadata.namespace.as_str(),
                        dr.host.as_str(),
                        subset.name.as_str(),
                    ))
                    .or_default() += 1;
            }
        }
        Conflicts {
            duplicate_domains,
            duplicate_subsets: subsets.values().filter(|n| **n > 1).count(),
        }
    }

    pub fn with_certificates(mut self, certificates: Certificates) -> PushContext {
        self.certificates = certificates;
        self
    }

    pub fn with_removed_hosts(mut self, removed: Arc<RemovedHosts>) -> PushContext {
        self.removed_hosts = removed;
        self
    }

    /// The index of type `T` derived from this context, built by `build` on first use. Racing
    /// callers wait for the one build instead of each building.
    pub fn derived<T: Any + Send + Sync>(&self, build: impl FnOnce(&PushContext) -> T) -> Arc<T> {
        let slot = self
            .derived
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(TypeId::of::<T>())
            .or_default()
            .clone();
        let value = slot
            .get_or_init(|| Arc::new(build(self)) as Arc<dyn Any + Send + Sync>)
            .clone();
        value
            .downcast::<T>()
            .expect("the slot of TypeId::of::<T>() only ever holds a T")
    }

    fn matched_metadata(&self, proxy: &Proxy) -> BTreeMap<String, String> {
        if self.snapshot.list(Kind::EnvoyFilter).next().is_none() {
            return BTreeMap::new();
        }
        let keys = self.derived(|ctx| {
            MatchedMetadataKeys(
                ctx.snapshot
                    .list(Kind::EnvoyFilter)
                    .filter_map(|e| match &e.config.spec {
                        Spec::EnvoyFilter(ef) => Some(ef),
                        _ => None,
                    })
                    .flat_map(|ef| &ef.config_patches)
                    .filter_map(|cp| cp.match_.as_ref()?.proxy.as_ref())
                    .flat_map(|p| p.metadata.keys().cloned())
                    .collect(),
            )
        });
        keys.0
            .iter()
            .filter_map(|k| Some((k.clone(), proxy.metadata.get(k)?.clone())))
            .collect()
    }

    /// The view of `proxy` that generators read, shared by every proxy with the same inputs.
    pub fn scope(&self, proxy: &Proxy) -> Arc<ScopeView> {
        let sidecar = self.sidecar_for(proxy);
        // A Sidecar with `ingress` listeners defines the inbound ports instead of the services at
        // the proxy's address, as istiod.
        let from_sidecar = sidecar.as_ref().and_then(|c| match &c.spec {
            Spec::Sidecar(sc) if !sc.ingress.is_empty() => Some(Arc::new(
                sc.ingress
                    .iter()
                    .filter_map(|i| i.port.as_ref())
                    .map(|p| (p.number, Protocol::parse(&p.protocol)))
                    .collect::<BTreeMap<u32, Protocol>>(),
            )),
            _ => None,
        });
        let (inbound, inbound_hosts) = match from_sidecar {
            Some(ports) => (ports, Arc::default()),
            None => self.inbound_ports(&proxy.ip),
        };
        let mtls = proxy.identity.is_some();
        let gateway_topology = if proxy.proxy_type == ProxyType::Router {
            match &proxy.proxy_config {
                Some(pc) => crate::config::mesh::GatewayTopology::of_proxy_config(pc),
                None => self.mesh.default_gateway_topology.clone(),
            }
            .unwrap_or_default()
        } else {
            Default::default()
        };
        let inputs = ScopeInputs {
            namespace: proxy.namespace.clone(),
            labels: proxy.labels.clone(),
            generator: proxy.generator,
            proxy_type: proxy.proxy_type,
            interception_none: proxy.interception_none,
            auto_allocated_vips: proxy.uses_auto_allocated_ips(self.mesh.ip_autoallocate),
            ipv6_only: proxy.ipv6_only,
            locality: proxy.locality.clone(),
            inbound,
            inbound_hosts,
            sidecar_key: sidecar.as_ref().map(|c| c.key()),
            mtls,
            gateway_topology,
            istio_version: proxy.istio_version.clone(),
            matched_metadata: self.matched_metadata(proxy),
            istio_extensions: proxy.istio_extensions,
            skip_mx_headers: match &proxy.proxy_config {
                Some(pc) => crate::config::mesh::skips_mx_headers(pc),
                None => self.mesh.default_skip_mx_headers,
            },
            network: proxy.metadata.get("NETWORK").cloned().unwrap_or_default(),
            cluster: proxy
                .metadata
                .get("CLUSTER_ID")
                .filter(|c| **c != self.mesh.cluster_id)
                .cloned()
                .unwrap_or_default(),
            send_hbone: self.mesh.send_hbone
                && matches!(proxy.proxy_type, ProxyType::Sidecar | ProxyType::Router)
                && proxy.generator == crate::xds::proxy::Generator::Envoy
                && !proxy.flag("DISABLE_HBONE_SEND"),
            hbone_listen_ips: if self.mesh.sidecar_hbone_listen
                && proxy.proxy_type == ProxyType::Sidecar
                && proxy.generator == crate::xds::proxy::Generator::Envoy
                && proxy.flag("ENABLE_HBONE")
            {
                proxy_ips(proxy)
            } else {
                Vec::new()
            },
            http10: proxy.metadata.get("HTTP10").is_some_and(|v| v == "1"),
            trace_mesh_id: proxy
                .metadata
                .get("MESH_ID")
                .filter(|m| !m.is_empty())
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
            trace_cluster_id: proxy
                .metadata
                .get("CLUSTER_ID")
                .filter(|c| !c.is_empty())
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
            network_view: {
                let mut view: Vec<String> = proxy
                    .metadata
                    .get("REQUESTED_NETWORK_VIEW")
                    .into_iter()
                    .flat_map(|v| v.split(','))
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                view.sort();
                view.dedup();
                view
            },
            catch_all_idle_timeout: proxy
                .metadata
                .get("IDLE_TIMEOUT")
                .and_then(|t| crate::config::common::parse_go_duration(t).ok()),
            proxy_tracing: proxy
                .proxy_config
                .as_ref()
                .map(|pc| pc.get("tracing").map(|t| t.to_string()).unwrap_or_default()),
        };
        self.shared_view(inputs, || {
            let egress = sidecar.as_ref().and_then(|c| match &c.spec {
                Spec::Sidecar(sc) => Some(sc),
                _ => None,
            });
            let services = self
                .registry
                .services
                .values()
                .filter(|s| {
                    s.visible_to_with(&proxy.namespace, &self.mesh.default_service_export_to)
                })
                .filter(|s| egress.is_none_or(|sc| sidecar_allows(sc, &proxy.namespace, s)))
                .cloned()
                .collect();
            (services, sidecar.clone())
        })
    }

    /// The view of `inputs`, shared by every proxy whose inputs hash alike: `derive` (the
    /// services in scope and the Sidecar) runs only for the first.
    fn shared_view(
        &self,
        inputs: ScopeInputs,
        derive: impl FnOnce() -> (Vec<Arc<Service>>, Option<Arc<Config>>),
    ) -> Arc<ScopeView> {
        let mut h = DefaultHasher::new();
        inputs.hash(&mut h);
        let key = h.finish();
        lock(&self.scopes)
            .entry(key)
            .or_insert_with(|| {
                let (services, sidecar) = derive();
                Arc::new(ScopeView {
                    key,
                    inputs,
                    services,
                    sidecar,
                })
            })
            .clone()
    }

    /// The view of `scope` a type's generators get when they read only `inputs` of it (one of
    /// `ScopeInputs`' projections, such as `for_endpoints`): keyed by what it holds, so every
    /// scope with the same projection shares it and what is built from it. The services in
    /// scope and the Sidecar are `scope`'s (every projection keeps the namespace and Sidecar
    /// they come from).
    pub fn projected(&self, scope: &ScopeView, inputs: ScopeInputs) -> Arc<ScopeView> {
        self.shared_view(inputs, || (scope.services.clone(), scope.sidecar.clone()))
    }

    /// Security policies of `kind` (AuthorizationPolicy, RequestAuthentication) that select the
    /// proxy of `scope`.
    pub fn selecting(&self, scope: &ScopeView, kind: Kind) -> Vec<&Config> {
        self.selecting_served(scope, kind, None)
    }

    /// [`PushContext::selecting`], for a waypoint serving `served`'s traffic: policies targeting
    /// that Service or ServiceEntry apply too.
    pub fn selecting_served(
        &self,
        scope: &ScopeView,
        kind: Kind,
        served: Option<&Service>,
    ) -> Vec<&Config> {
        let target = served.map(crate::model::policy::ServiceTarget::of);
        let workload = crate::model::policy::Workload {
            namespace: &scope.namespace,
            labels: &scope.labels,
            waypoint: scope.proxy_type == ProxyType::Waypoint,
            service: target,
        };
        crate::model::policy::selecting(&self.snapshot, &self.mesh.root_namespace, &workload, kind)
    }

    /// Every Istio Gateway of the push: the store's, then those derived from the Gateway API and
    /// from Ingresses, each with where it comes from.
    pub fn istio_gateways(&self) -> impl Iterator<Item = (&Arc<Config>, Arc<Origin>)> {
        let derived = (self.routing.gateway_api.gateways.iter())
            .chain(&self.routing.ingress.gateways)
            .map(|d| (&d.config, d.origin.clone()));
        self.snapshot
            .list(Kind::Gateway)
            .map(|e| (&e.config, Origin::of(&e.config.metadata)))
            .chain(derived)
    }

    /// The VirtualService for `hostname` as seen from `namespace`: an exact host match first, then the
    /// most specific wildcard; ties go to the first by namespace/name, which is stable.
    pub fn virtual_service_for(&self, namespace: &str, hostname: &str) -> Option<&VsEntry> {
        let visible = |v: &&VsEntry| {
            exported_to(
                &v.spec.export_to,
                &self.mesh.default_virtual_service_export_to,
                &v.config.metadata.namespace,
                namespace,
            )
        };
        let routing = &self.routing;
        routing
            .vs_by_host
            .get(hostname)
            .into_iter()
            .flatten()
            .map(|&i| &routing.virtual_services[i])
            .find(visible)
            .or_else(|| {
                routing
                    .vs_wildcards
                    .iter()
                    .map(|&i| &routing.virtual_services[i])
                    .filter(visible)
                    .filter_map(|v| {
                        v.hosts
                            .iter()
                            .filter(|h| h.starts_with('*') && host::subset_of(hostname, h))
                            .map(|h| h.len())
                            .max()
                            .map(|len| (len, v))
                    })
                    .max_by_key(|(len, _)| *len)
                    .map(|(_, v)| v)
            })
    }

    /// The mesh VirtualServices a waypoint of `waypoint_ns` applies to `svc`'s traffic, as istiod
    /// picks them: every one visible to the waypoint, from the waypoint's namespace or the
    /// service's, with a host that covers the service's hostname; in list order (their routes are
    /// merged in that order).
    pub fn virtual_services_for_waypoint(&self, waypoint_ns: &str, svc: &Service) -> Vec<&VsEntry> {
        let routing = &self.routing;
        let mut found: Vec<usize> = routing
            .vs_by_host
            .get(&svc.hostname)
            .into_iter()
            .flatten()
            .copied()
            .chain(routing.vs_wildcards.iter().copied().filter(|&i| {
                routing.virtual_services[i]
                    .hosts
                    .iter()
                    .any(|h| h.starts_with('*') && host::subset_of(&svc.hostname, h))
            }))
            .collect();
        found.sort_unstable();
        found.dedup();
        found
            .into_iter()
            .map(|i| &routing.virtual_services[i])
            .filter(|v| {
                let ns = v.config.metadata.namespace.as_str();
                (ns == waypoint_ns || ns == svc.namespace)
                    && exported_to(
                        &v.spec.export_to,
                        &self.mesh.default_virtual_service_export_to,
                        ns,
                        waypoint_ns,
                    )
            })
            .collect()
    }

    /// The DestinationRule for `service` as a proxy in `proxy_ns` with `proxy_labels` uses it, as
    /// istiod finds it: the rules of the first namespace with one for the host (the proxy's, the
    /// service's, the root namespace), consolidated; one whose selector selects the proxy, else the
    /// one without a selector (`destination_rules`).
    pub fn destination_rule_for(
        &self,
        proxy_ns: &str,
        proxy_labels: &BTreeMap<String, String>,
        service: &Service,
    ) -> Option<&DrEntry> {
        self.routing.dr_index.lookup(
            proxy_ns,
            proxy_labels,
            &service.hostname,
            &service.namespace,
            &self.mesh.root_namespace,
        )
    }

    /// The resources for `(type, scope, name)`, built once per push, or kept from the push
    /// before while their inputs did not change (`keeping`). `role` is the scope's.
    pub fn cached(
        &self,
        type_url: TypeUrl,
        role: Role,
        scope: u64,
        name: &str,
        build: impl FnOnce() -> Vec<Arc<Resource>>,
    ) -> Resources {
        self.cache.get_or_build(type_url, role, scope, name, build)
    }

    /// This context counting its cache reads into `reads`.
    pub fn counting_reads(mut self, reads: CacheReads) -> PushContext {
        self.cache.reads = reads;
        self
    }

    /// This context keeping `previous`'s built resources of each type and role whose inputs
    /// (`reads`: the kinds its generators read) did not change between the two: the same
    /// resources, not rebuilt, as istiod's cache keeps clusters across a VirtualService change.
    /// Nothing is kept when the mesh settings differ, or when the store no longer knows what
    /// changed since `previous`.
    pub fn keeping(self, previous: &PushContext, reads: Reads) -> PushContext {
        if self.mesh == previous.mesh
            && let Some(changes) = self.snapshot.changes_since(&previous.snapshot)
        {
            self.cache.keep_from(&previous.cache, &changes, reads);
        }
        self
    }

    /// The service ports (and their protocols) served at `ip`: the endpoints at that address, and
    /// the services selecting each. Where two services select one pod port with different
    /// protocols, the first (by hostname) wins and the proxy is counted as an inbound conflict, as
    /// istiod does.
    #[allow(clippy::type_complexity)]
    fn inbound_ports(
        &self,
        ip: &str,
    ) -> (
        Arc<BTreeMap<u32, Protocol>>,
        Arc<BTreeMap<u32, Vec<String>>>,
    ) {
        let Some(at) = self.registry.by_address.get(ip) else {
            return Default::default();
        };
        let mut ports: BTreeMap<u32, (Protocol, &str)> = BTreeMap::new();
        let mut hosts: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let mut conflicting = false;
        // By hostname, then service port: the order in which the first service wins.
        for (host, service_port, port) in at.iter() {
            let Some(protocol) = self
                .registry
                .services
                .get(host)
                .and_then(|s| s.port(*service_port))
                .map(|p| p.protocol)
            else {
                continue;
            };
            let (first, first_host) = *ports.entry(*port).or_insert((protocol, host.as_str()));
            conflicting |= first != protocol && first_host != host;
            let at_port = hosts.entry(*port).or_default();
            if !at_port.contains(host) {
                at_port.push(host.clone());
            }
        }
        if conflicting {
            lock(&self.inbound_conflicts).insert(ip.to_string());
        }
        (
            Arc::new(ports.into_iter().map(|(n, (p, _))| (n, p)).collect()),
            Arc::new(hosts),
        )
    }

    /// Every resource built and cached in this push so far: its type and itself (a resource
    /// several scopes built is listed once per scope, as istiod lists its cache's entries).
    pub fn cache_entries(&self) -> Vec<(TypeUrl, Arc<Resource>)> {
        self.cache.entries()
    }

    /// Forgets what this push built and kept: the next request for each resource builds it again.
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// How many proxies met so far in this push have an inbound conflict.
    pub fn inbound_conflicts(&self) -> usize {
        lock(&self.inbound_conflicts).len()
    }

    /// Services by hostname within a scope (for route generation).
    pub fn scope_services(scope: &ScopeView) -> BTreeMap<&str, &Arc<Service>> {
        scope
            .services
            .iter()
            .map(|s| (s.hostname.as_str(), s))
            .collect()
    }
}

/// Sidecar egress `namespace/host` rules: does any listener admit this service? A Sidecar without
/// egress listeners imports `*/*`, as istiod fills it in (it may set only ingress or the outbound
/// traffic policy).
fn sidecar_allows(sc: &Sidecar, proxy_ns: &str, service: &Service) -> bool {
    sc.egress.is_empty()
        || sc
            .egress
            .iter()
            .any(|l| egress_allows(&l.hosts, proxy_ns, service))
}

/// A proxy's addresses: its node ID's, then `INSTANCE_IPS`, each once.
fn proxy_ips(proxy: &Proxy) -> Vec<String> {
    let mut ips = vec![proxy.ip.clone()];
    for ip in proxy
        .metadata
        .get("INSTANCE_IPS")
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|ip| !ip.is_empty())
    {
        if !ips.iter().any(|known| known == ip) {
            ips.push(ip.to_string());
        }
    }
    ips
}

#[cfg(test)]
mod tests;

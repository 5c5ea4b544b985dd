//! What a proxy is to the generators: the inputs its config depends on (hashed into the scope
//! key) and the view generators read, shared by every proxy with the same key.

use super::super::proxy::{Generator, ProxyType};
use crate::config::{Config, Spec, host};
use crate::model::{Protocol, Service};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Everything of a proxy that generated config depends on. The scope key is this struct's derived
/// `Hash`: a field added here is hashed by construction, so generators cannot read an input the
/// key does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopeInputs {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub generator: Generator,
    pub proxy_type: ProxyType,
    /// `INTERCEPTION_MODE: NONE`: outbound listeners bind real ports on loopback.
    pub interception_none: bool,
    /// The proxy resolves names through istio-agent's DNS proxy, which hands out ServiceEntries'
    /// auto-allocated addresses, so it matches them as VIPs (istiod's `nodeUsesAutoallocatedIPs`).
    pub auto_allocated_vips: bool,
    /// Every address of the proxy is IPv6: DNS clusters resolve IPv6 only (else IPv4 only).
    pub ipv6_only: bool,
    /// The proxy's locality (`region/zone/subzone`): endpoint priorities depend on it.
    pub locality: String,
    /// The service ports (and protocols) served at the proxy's IP: its inbound listeners and
    /// clusters. Two proxies with the same labels at different IPs may differ here.
    pub inbound: Arc<BTreeMap<u32, Protocol>>,
    /// The services selecting each of those ports (none when a Sidecar's `ingress` defines
    /// them): an EnvoyFilter's cluster match by service picks inbound clusters by these, as
    /// istiod's.
    pub inbound_hosts: Arc<BTreeMap<u32, Vec<String>>>,
    /// The Sidecar that applies to the proxy (its content is the push context's: a change to it
    /// is a full push, with new caches).
    pub sidecar_key: Option<crate::config::ConfigKey>,
    /// The proxy proved an identity, so it can get a workload certificate: mesh traffic may use
    /// mTLS (automatic mTLS upstream, PeerAuthentication inbound).
    pub mtls: bool,
    /// A gateway's `gatewayTopology` (its own ProxyConfig, else the mesh default; istiod's
    /// `ProxyConfigOrDefault`); the default for other proxies.
    pub gateway_topology: crate::config::mesh::GatewayTopology,
    /// The proxy's `ISTIO_VERSION`: EnvoyFilter patches may match on it (`proxy.proxyVersion`).
    pub istio_version: String,
    /// The proxy's node metadata under the keys some EnvoyFilter's `proxy.metadata` match names
    /// (only those: the rest of the metadata is per pod and would split every scope).
    pub matched_metadata: BTreeMap<String, String>,
    /// istio-proxy's telemetry filters the proxy has (none for upstream Envoy).
    pub istio_extensions: crate::xds::proxy::IstioExtensions,
    /// istiod's `SkipIstioMXHeaders`: the proxy's ProxyConfig (its own, else the mesh
    /// default) has `proxyHeaders.metadataExchangeHeaders.mode: IN_MESH`.
    pub skip_mx_headers: bool,
    /// The `tracing` of the proxy's own ProxyConfig (`PROXY_CONFIG`), as JSON text; `None` when
    /// it sends none (the mesh default applies).
    pub proxy_tracing: Option<String>,
    /// The proxy's network (`ISTIO_META_NETWORK`): endpoints of other networks are reached
    /// through their gateways.
    pub network: String,
    /// The proxy's cluster (`ISTIO_META_CLUSTER_ID`) when it is a remote one; empty for the
    /// config cluster's proxies (and those that name none), so they all share scopes.
    pub cluster: String,
    /// The proxy sends to ambient workloads over HBONE: a sidecar or gateway (Envoy, not a
    /// waypoint) of a mesh with `send_hbone`, without `DISABLE_HBONE_SEND` in its metadata.
    pub send_hbone: bool,
    /// A sidecar taking HBONE (`ENABLE_HBONE` metadata, in a mesh with `sidecar_hbone_listen`):
    /// its addresses, which alone its tunnels may reach (istiod's filter chain prefix ranges;
    /// such sidecars do not share scopes with others). Empty otherwise.
    pub hbone_listen_ips: Vec<String>,
    /// `ISTIO_META_HTTP10: "1"`: the proxy's outbound and gateway connection managers accept
    /// HTTP/1.0 (istiod's `enableHTTP10`).
    pub http10: bool,
    /// `ISTIO_META_IDLE_TIMEOUT`: the idle timeout of the TCP proxies that pass unmatched
    /// connections through (or drop them); Envoy's default when unset or not a duration.
    pub catch_all_idle_timeout: Option<std::time::Duration>,
    /// `ISTIO_META_REQUESTED_NETWORK_VIEW` (comma-separated): the networks whose endpoints the
    /// proxy is sent (endpoints of no network always); empty: every network (istiod's
    /// `ProxyView`).
    pub network_view: Vec<String>,
    /// What spans name the proxy's mesh and cluster (`istio.mesh_id`, `istio.cluster_id`): its
    /// `MESH_ID` and `CLUSTER_ID` metadata, `unknown` when it sends none (istiod's
    /// `buildServiceTags`).
    pub trace_mesh_id: String,
    pub trace_cluster_id: String,
}

/// The role a scope's proxy plays: what its generators build differs by role, and so does what
/// they read (`PushContext::keeping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Sidecar,
    Gateway,
    Waypoint,
    Ztunnel,
    /// A proxyless gRPC client (`GENERATOR: grpc`), whatever its proxy type.
    Proxyless,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Sidecar,
        Role::Gateway,
        Role::Waypoint,
        Role::Ztunnel,
        Role::Proxyless,
    ];
}

impl ScopeInputs {
    /// What endpoints (EDS) read of a proxy: its namespace and labels (DestinationRule
    /// selection, a waypoint's own name), role, locality (priorities), Sidecar (services in
    /// scope), network, cluster and requested network view (which endpoints, through which
    /// gateways), and whether it sends HBONE (tunnels to ambient workloads). Every other input
    /// is reset, so proxies that differ only there (an `ISTIO_VERSION`, `HTTP10`, tracing
    /// metadata, inbound ports) share their endpoints; the generators get this view, so they
    /// cannot read what it leaves out.
    pub fn for_endpoints(&self) -> ScopeInputs {
        ScopeInputs {
            namespace: self.namespace.clone(),
            labels: self.labels.clone(),
            generator: self.generator,
            proxy_type: self.proxy_type,
            interception_none: false,
            auto_allocated_vips: false,
            ipv6_only: false,
            locality: self.locality.clone(),
            inbound: Arc::default(),
            inbound_hosts: Arc::default(),
            sidecar_key: self.sidecar_key.clone(),
            mtls: false,
            gateway_topology: Default::default(),
            istio_version: String::new(),
            matched_metadata: BTreeMap::new(),
            istio_extensions: Default::default(),
            skip_mx_headers: false,
            proxy_tracing: None,
            network: self.network.clone(),
            cluster: self.cluster.clone(),
            send_hbone: self.send_hbone,
            hbone_listen_ips: Vec::new(),
            http10: false,
            catch_all_idle_timeout: None,
            network_view: self.network_view.clone(),
            trace_mesh_id: String::new(),
            trace_cluster_id: String::new(),
        }
    }

    pub fn role(&self) -> Role {
        match (self.generator, self.proxy_type) {
            (Generator::Grpc, _) => Role::Proxyless,
            (_, ProxyType::Sidecar) => Role::Sidecar,
            (_, ProxyType::Router) => Role::Gateway,
            (_, ProxyType::Waypoint) => Role::Waypoint,
            (_, ProxyType::Ztunnel) => Role::Ztunnel,
        }
    }
}

/// What generators may read of a proxy: its [`ScopeInputs`] (through `Deref`) and what the push
/// context derives from them alone, computed once per key and shared by every proxy with that
/// key. Generators get this view, never the proxy itself, so nothing they read can differ between
/// two proxies that share cached resources.
pub struct ScopeView {
    /// The hash of `inputs`.
    pub key: u64,
    pub inputs: ScopeInputs,
    /// The services the proxy sees (exportTo, the Sidecar's egress).
    pub services: Vec<Arc<Service>>,
    /// The Sidecar `inputs.sidecar_key` names.
    pub sidecar: Option<Arc<Config>>,
}

impl std::ops::Deref for ScopeView {
    type Target = ScopeInputs;
    fn deref(&self) -> &ScopeInputs {
        &self.inputs
    }
}

impl ScopeView {
    /// The services whose port `port` this proxy's outbound listeners serve: with a Sidecar, the
    /// egress listener for that port decides (its `hosts`), else the one without a port, as
    /// istiod builds listeners per egress listener; without one, every service in scope.
    pub fn services_on_port(&self, port: u32) -> Vec<&Arc<Service>> {
        let egress = self.sidecar.as_ref().and_then(|c| match &c.spec {
            Spec::Sidecar(sc) if !sc.egress.is_empty() => Some(&sc.egress),
            _ => None,
        });
        let with_port = self.services.iter().filter(|s| s.port(port).is_some());
        let Some(egress) = egress else {
            return with_port.collect();
        };
        let listener = egress
            .iter()
            .find(|l| l.port.as_ref().is_some_and(|p| p.number == port))
            .or_else(|| egress.iter().find(|l| l.port.is_none()));
        match listener {
            Some(l) => with_port
                .filter(|s| egress_allows(&l.hosts, &self.namespace, s))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// A Sidecar egress `hosts` list (`namespace/host`) admits `service`.
pub(super) fn egress_allows(hosts: &[String], proxy_ns: &str, service: &Service) -> bool {
    hosts.iter().any(|entry| {
        let Some((ns, h)) = entry.split_once('/') else {
            return false;
        };
        let ns_ok = match ns {
            "*" => true,
            "." => service.namespace == proxy_ns,
            "~" => false,
            other => service.namespace == other,
        };
        ns_ok
            && (h == "*"
                || h == service.hostname
                || (h.starts_with('*') && host::subset_of(&service.hostname, h)))
    })
}

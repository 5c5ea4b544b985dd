//! A service as the generators see it: a fully qualified hostname, its ports with their protocol,
//! and its endpoints.

use crate::config::networking::{Location, Resolution};
use std::collections::BTreeMap;

/// One hostname's service with its endpoints per port, as `kube` and `registry` build it.
pub(crate) type Built = (Service, Vec<(u32, Vec<Endpoint>)>);

/// Port protocols as Istio classifies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Protocol {
    Http,
    Http2,
    Grpc,
    Https,
    Tls,
    Tcp,
    Unsupported,
}

impl Protocol {
    pub fn parse(s: &str) -> Protocol {
        match s.to_ascii_uppercase().as_str() {
            "HTTP" | "HTTP_PROXY" => Protocol::Http,
            "HTTP2" => Protocol::Http2,
            "GRPC" | "GRPC-WEB" => Protocol::Grpc,
            "HTTPS" => Protocol::Https,
            "TLS" => Protocol::Tls,
            "TCP" | "MONGO" | "REDIS" | "MYSQL" => Protocol::Tcp,
            _ => Protocol::Unsupported,
        }
    }

    /// Served through the HTTP connection manager (routes, retries, faults).
    pub fn is_http(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Http2 | Protocol::Grpc)
    }

    /// Upstream connections must speak HTTP/2.
    pub fn is_http2(self) -> bool {
        matches!(self, Protocol::Http2 | Protocol::Grpc)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ServicePort {
    pub name: String,
    pub number: u32,
    pub protocol: Protocol,
    /// Port on the workload when endpoints do not name one (ServiceEntry `targetPort`).
    pub target_port: u32,
}

/// One service: a hostname with ports, owned by a namespace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Service {
    pub hostname: String,
    pub namespace: String,
    pub ports: Vec<ServicePort>,
    /// The addresses the object declares (a Service's cluster IPs, a ServiceEntry's `addresses`).
    pub addresses: Vec<String>,
    /// The addresses the leader allocated to a ServiceEntry that declares none (istiod's IP
    /// auto-allocation, `status.addresses`). Only proxies that resolve names through the DNS proxy
    /// (and waypoints, and ztunnel) know them, so only those may use them as VIPs: see
    /// [`Service::addresses_for`].
    pub auto_allocated: Vec<String>,
    pub resolution: Resolution,
    pub location: Location,
    /// Namespaces this service is visible to: `*` for all, `.`/own name for the owner only, `~` none.
    pub export_to: Vec<String>,
    /// The ServiceEntry this came from, for provenance in debug output.
    pub source: String,
    /// ServiceEntry `subjectAltNames`: identities its servers may present, besides those of its
    /// endpoints' service accounts.
    pub subject_alt_names: Vec<String>,
    /// The object's labels (`istio.io/use-waypoint`, …): ambient reads them, so a change to them
    /// is a change to the service.
    pub labels: BTreeMap<String, String>,
}

impl Service {
    /// The kind (`Service` or `ServiceEntry`) and name of the object this service came from.
    pub fn origin(&self) -> (&str, &str) {
        let mut parts = self.source.splitn(3, '/');
        let kind = parts.next().unwrap_or_default();
        let name = parts.nth(1).unwrap_or_default();
        (kind, name)
    }

    /// The VIPs a proxy matches this service by: its declared addresses, else — for a proxy that
    /// uses auto-allocated addresses (istiod's `nodeUsesAutoallocatedIPs`: DNS capture, a
    /// waypoint, ztunnel) — the allocated ones. A sidecar without DNS capture never learns them,
    /// so giving it them would only take the service off its SNI and wildcard chains.
    pub fn addresses_for(&self, uses_auto_allocated: bool) -> &[String] {
        if self.addresses.is_empty() && uses_auto_allocated {
            &self.auto_allocated
        } else {
            &self.addresses
        }
    }

    pub fn port(&self, number: u32) -> Option<&ServicePort> {
        self.ports.iter().find(|p| p.number == number)
    }

    /// Istio's visibility rule: empty exportTo means everyone.
    pub fn visible_to(&self, namespace: &str) -> bool {
        self.visible_to_with(namespace, &[])
    }

    /// Visibility with the mesh's `defaultServiceExportTo` standing in for an empty exportTo.
    pub fn visible_to_with(&self, namespace: &str, default: &[String]) -> bool {
        let list = if self.export_to.is_empty() {
            default
        } else {
            &self.export_to
        };
        list.is_empty()
            || list
                .iter()
                .any(|e| e == "*" || e == namespace || (e == "." && self.namespace == namespace))
    }
}

/// One endpoint of one service port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Endpoint {
    pub address: String,
    pub port: u32,
    pub labels: BTreeMap<String, String>,
    /// `region/zone/subzone`, possibly partial.
    pub locality: String,
    pub weight: u32,
    pub service_account: String,
    pub network: String,
    /// The cluster the endpoint was read from: empty for the config cluster (and files).
    pub cluster: String,
    pub healthy: bool,
    /// The workload it belongs to (a pod's Deployment, a WorkloadEntry, a ServiceEntry's inline
    /// endpoint `<entry>-<index>`) and that workload's namespace, as istiod names them: Istio's
    /// metrics read them from the endpoint's `istio.workload` metadata.
    pub workload: String,
    pub namespace: String,
}

impl Endpoint {
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        crate::config::mesh::labels_match(selector, &self.labels)
    }
}

/// Short names in Istio config are relative to the config's namespace.
pub fn resolve_host(host: &str, namespace: &str, domain_suffix: &str) -> String {
    if host.contains('.') || host.starts_with('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.svc.{domain_suffix}")
    }
}

//! The service model: what services exist and where their endpoints are, built from the store.
//!
//! From Kubernetes Services with their EndpointSlices, and ServiceEntries with their own endpoints
//! or the WorkloadEntries and pods they select (`registry`). Hostnames are fully qualified; ports
//! carry their protocol.

use crate::config::networking::{Location, Resolution};
use std::collections::BTreeMap;

pub mod delegate;
pub mod gateway_api;
pub mod identity;
pub mod ingress;
pub mod kubernetes;
pub mod mesh;
pub mod network;
pub mod peer_auth;
pub mod policy;
mod registry;
pub mod waypoint;
pub mod workload;

pub use registry::{Registry, RegistryDelta};

/// One hostname's service with its endpoints per port, as `kube` and `registry` build it.
type Built = (Service, Vec<(u32, Vec<Endpoint>)>);

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Kind, Spec};
    use crate::store::{Store, StoreWriter};

    fn registry(yaml: &str) -> Registry {
        Registry::build(&Store::from_yaml(yaml).snapshot(), "cluster.local")
    }

    const SE: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: r, namespace: shop}\n\
spec:\n  hosts: [reviews]\n  ports: [{number: 9080, name: http, protocol: HTTP, targetPort: 8080}, {number: 9090, name: grpc, protocol: GRPC}]\n  resolution: STATIC\n  workloadSelector: {labels: {app: reviews}}\n\
---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: v1, namespace: shop}\nspec: {address: 10.0.0.1, labels: {app: reviews, version: v1}, ports: {grpc: 7070}, locality: us/east}\n\
---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: other-ns, namespace: elsewhere}\nspec: {address: 10.0.0.9, labels: {app: reviews}}\n";

    /// A second ServiceEntry for a hostname another already has is dropped and counted.
    #[test]
    fn duplicate_hosts_are_counted() {
        let second = "\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s, namespace: shop}\nspec: {hosts: [reviews], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC}\n";
        assert_eq!(registry(SE).duplicate_hosts, 0);
        let reg = registry(&format!("{SE}{second}"));
        assert_eq!(reg.duplicate_hosts, 1);
        assert_eq!(reg.services.len(), 1);
    }

    fn pod(name: &str, app: &str, status: serde_json::Value) -> crate::config::Config {
        let json = serde_json::json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"serviceAccountName": "reviews", "containers": []},
            "status": status,
        });
        crate::config::Config {
            api_version: "v1".into(),
            kind: Kind::Pod,
            metadata: crate::config::ObjectMeta {
                name: name.into(),
                namespace: "shop".into(),
                labels: BTreeMap::from([("app".to_string(), app.to_string())]),
                ..Default::default()
            },
            spec: Spec::Pod(Box::new(serde_json::from_value(json).unwrap())),
            status: None,
        }
    }

    #[test]
    fn a_workload_selector_selects_pods_too() {
        use serde_json::json;
        let store = StoreWriter::from_yaml(SE);
        let ready = json!([{"type": "Ready", "status": "True"}]);
        let not_ready = json!([{"type": "Ready", "status": "False"}]);
        store.apply(
            [
                pod(
                    "reviews-1",
                    "reviews",
                    json!({"phase": "Running", "podIP": "10.1.0.5", "conditions": ready}),
                ),
                pod(
                    "reviews-2",
                    "reviews",
                    json!({"phase": "Running", "podIP": "10.1.0.6", "conditions": not_ready}),
                ),
                pod(
                    "done",
                    "reviews",
                    json!({"phase": "Succeeded", "podIP": "10.1.0.7"}),
                ),
                pod(
                    "other",
                    "ratings",
                    json!({"phase": "Running", "podIP": "10.1.0.8"}),
                ),
            ]
            .into_iter()
            .map(crate::store::Change::Upsert)
            .collect(),
        );
        let reg = Registry::build(&store.snapshot(), "cluster.local");
        let eps = reg.endpoints("reviews.shop.svc.cluster.local", 9080);
        let by_ip: BTreeMap<&str, &Endpoint> =
            eps.iter().map(|e| (e.address.as_str(), e)).collect();
        assert_eq!(
            by_ip.keys().copied().collect::<Vec<_>>(),
            ["10.0.0.1", "10.1.0.5", "10.1.0.6"],
            "the WorkloadEntry and the two running pods with the label"
        );
        assert_eq!(by_ip["10.1.0.5"].port, 8080, "targetPort");
        assert_eq!(by_ip["10.1.0.5"].service_account, "reviews");
        assert!(by_ip["10.1.0.5"].healthy);
        assert!(!by_ip["10.1.0.6"].healthy, "not ready");
    }

    #[test]
    fn short_hosts_resolve_and_workload_entries_select_by_label_and_namespace() {
        let reg = registry(SE);
        let svc = &reg.services["reviews.shop.svc.cluster.local"];
        assert_eq!(svc.ports[1].protocol, Protocol::Grpc);
        let http = reg.endpoints("reviews.shop.svc.cluster.local", 9080);
        assert_eq!(
            http.len(),
            1,
            "WorkloadEntries of other namespaces are not selected"
        );
        assert_eq!(
            http[0].port, 8080,
            "targetPort when the entry names no port"
        );
        assert_eq!(
            reg.endpoints("reviews.shop.svc.cluster.local", 9090)[0].port,
            7070
        );
        assert_eq!(http[0].locality, "us/east");
    }

    #[test]
    fn endpoint_only_changes_are_detected() {
        let a = registry(SE);
        let b = registry(&SE.replace("10.0.0.1", "10.0.0.2"));
        assert!(a.same_services(&b));
        assert_eq!(
            a.changed_endpoints(&b).into_iter().collect::<Vec<_>>(),
            ["reviews.shop.svc.cluster.local"]
        );
        let c = registry(&SE.replace("number: 9090", "number: 9091"));
        assert!(!a.same_services(&c));
    }

    #[test]
    fn visibility_follows_export_to() {
        let reg = registry(&SE.replace(
            "resolution: STATIC",
            "resolution: STATIC\n  exportTo: [\".\"]",
        ));
        let svc = &reg.services["reviews.shop.svc.cluster.local"];
        assert!(svc.visible_to("shop"));
        assert!(!svc.visible_to("other"));
    }
}

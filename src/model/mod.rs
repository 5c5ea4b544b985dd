//! The service model: what services exist and where their endpoints are, built from the store.
//!
//! Today from ServiceEntry + WorkloadEntry (Kubernetes Services and EndpointSlices join later, feeding
//! the same types). Hostnames are fully qualified; ports carry their protocol.

use crate::config::networking::{Location, Resolution, ServiceEntry, WorkloadEntry};
use crate::config::{Kind, Spec};
use crate::store::Snapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub mod delegate;
pub mod identity;
pub mod kube;
pub mod mesh;
pub mod peer_auth;
pub mod policy;
pub mod workload;

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
    pub addresses: Vec<String>,
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
    pub healthy: bool,
}

impl Endpoint {
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

/// Services and endpoints at one moment.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// hostname → service. When two ServiceEntries claim a host, the older-named one (by namespace/name)
    /// wins, so the choice is stable.
    pub services: BTreeMap<String, Arc<Service>>,
    /// (hostname, service port) → endpoints, sorted.
    pub endpoints: BTreeMap<(String, u32), Arc<Vec<Endpoint>>>,
    /// ServiceEntry hosts dropped because another service already has the hostname (istiod's
    /// `pilot_duplicate_envoy_clusters` counts the clusters they would have made).
    pub duplicate_hosts: usize,
}

/// Short names in Istio config are relative to the config's namespace.
pub fn resolve_host(host: &str, namespace: &str, domain_suffix: &str) -> String {
    if host.contains('.') || host.starts_with('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.svc.{domain_suffix}")
    }
}

impl Registry {
    /// Kubernetes services first, then ServiceEntries (a ServiceEntry cannot take over a Kubernetes
    /// service's hostname). `selectors` are MeshConfig discoverySelectors.
    pub fn build(snapshot: &Snapshot, domain_suffix: &str) -> Registry {
        Registry::build_with(snapshot, domain_suffix, &[])
    }

    pub fn build_with(
        snapshot: &Snapshot,
        domain_suffix: &str,
        selectors: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector],
    ) -> Registry {
        let mut reg = Registry::default();
        kube::add_kubernetes(&mut reg, snapshot, domain_suffix, selectors);
        let pods = kube::pod_workloads(snapshot);
        let workload_entries: Vec<(String, &WorkloadEntry, bool)> = snapshot
            .list(Kind::WorkloadEntry)
            .filter_map(|e| match &e.config.spec {
                Spec::WorkloadEntry(we) => Some((e.config.metadata.namespace.clone(), we, true)),
                _ => None,
            })
            .chain(pods.iter().map(|(ns, we, ready)| (ns.clone(), we, *ready)))
            .collect();
        for entry in snapshot.list(Kind::ServiceEntry) {
            let Spec::ServiceEntry(se) = &entry.config.spec else {
                continue;
            };
            let ns = &entry.config.metadata.namespace;
            let source = format!("ServiceEntry/{ns}/{}", entry.config.metadata.name);
            for host in &se.hosts {
                let hostname = resolve_host(host, ns, domain_suffix);
                if reg.services.contains_key(&hostname) {
                    reg.duplicate_hosts += 1;
                    continue;
                }
                let mut service = service_from_entry(se, &hostname, ns, &source);
                service.labels.clone_from(&entry.config.metadata.labels);
                for port in &service.ports {
                    let eps = endpoints_for(se, port, ns, &workload_entries);
                    reg.endpoints
                        .insert((hostname.clone(), port.number), Arc::new(eps));
                }
                reg.services.insert(hostname, Arc::new(service));
            }
        }
        reg
    }

    /// Service ports with no endpoint at all (`pilot_eds_no_instances`).
    pub fn ports_without_endpoints(&self) -> usize {
        self.services
            .values()
            .flat_map(|svc| svc.ports.iter().map(move |p| (svc, p.number)))
            .filter(|(svc, port)| self.endpoints(&svc.hostname, *port).is_empty())
            .count()
    }

    pub fn endpoints(&self, hostname: &str, port: u32) -> &[Endpoint] {
        self.endpoints
            .get(&(hostname.to_string(), port))
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }

    /// Services whose endpoints differ between `self` and `other` (for EDS-only pushes).
    pub fn changed_endpoints(&self, other: &Registry) -> BTreeSet<String> {
        // Both maps are ordered by the same key: walk them side by side (one comparison per
        // step), instead of collecting and sorting every key and looking each up in both.
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
        self.services == other.services
    }
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
        resolution: se.resolution,
        location: se.location,
        export_to: se.export_to.clone(),
        source: source.to_string(),
        subject_alt_names: se.subject_alt_names.clone(),
        labels: BTreeMap::new(),
    }
}

fn endpoint_from(we: &WorkloadEntry, port: &ServicePort, address: &str) -> Endpoint {
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
        address: address.to_string(),
        port: number,
        labels: we.labels.clone(),
        locality: we.locality.clone(),
        weight: if we.weight == 0 { 1 } else { we.weight },
        service_account: we.service_account.clone(),
        network: we.network.clone(),
        healthy: true,
    }
}

/// A ServiceEntry's endpoints on `port`: its own, or the workloads its `workloadSelector` selects
/// in its namespace (WorkloadEntries and pods; each with whether it is ready).
fn endpoints_for(
    se: &ServiceEntry,
    port: &ServicePort,
    ns: &str,
    workload_entries: &[(String, &WorkloadEntry, bool)],
) -> Vec<Endpoint> {
    let mut eps: Vec<Endpoint> = if let Some(selector) = &se.workload_selector {
        workload_entries
            .iter()
            .filter(|(we_ns, we, _)| {
                we_ns == ns
                    && !we.address.is_empty()
                    && selector
                        .labels
                        .iter()
                        .all(|(k, v)| we.labels.get(k) == Some(v))
            })
            .map(|(_, we, ready)| Endpoint {
                healthy: *ready,
                ..endpoint_from(we, port, &we.address)
            })
            .collect()
    } else {
        se.endpoints
            .iter()
            .map(|we| endpoint_from(we, port, &we.address))
            .collect()
    };
    eps.sort();
    eps.dedup();
    eps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

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
        let store = Store::from_yaml(SE);
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

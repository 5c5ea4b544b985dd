//! Kubernetes Services, EndpointSlices, Pods and Nodes into the service model.

use super::network::ClusterNetworks;
use super::{Endpoint, Protocol, Service, ServicePort};
use crate::config::mesh::selector_matches;
use crate::config::networking::{Location, Resolution};
use crate::config::{Kind, Spec};
use crate::store::Snapshot;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{BTreeMap, BTreeSet};

/// Istio's protocol selection for a Service port: `appProtocol` when set (Kubernetes' own names
/// `kubernetes.io/h2c`, `ws`, `wss` included), else the port name; either by its prefix before `-`
/// (`http-web`; `grpc-web` whole). What names no protocol is sniffed (`Unsupported`), except on the
/// well-known ports istiod takes for TCP (SMTP, DNS, MySQL, MongoDB).
pub fn port_protocol(port: u32, name: &str, app_protocol: Option<&str>) -> Protocol {
    let declared = match app_protocol {
        Some(ap) => match ap {
            "kubernetes.io/h2c" => return Protocol::Http2,
            "kubernetes.io/ws" => return Protocol::Http,
            "kubernetes.io/wss" => return Protocol::Https,
            _ => ap,
        },
        None => name,
    };
    let prefix = if declared
        .get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("grpc-web"))
    {
        "grpc-web"
    } else {
        declared.split('-').next().unwrap_or(declared)
    };
    match Protocol::parse(prefix) {
        Protocol::Unsupported if matches!(port, 25 | 53 | 3306 | 27017) => Protocol::Tcp,
        p => p,
    }
}

/// A Service's pod selector (empty: it selects nothing, its endpoints are managed by hand).
pub fn service_selector(entry: &crate::config::Config) -> BTreeMap<String, String> {
    match &entry.spec {
        Spec::Service(svc) => svc
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    }
}

/// Namespaces admitted by `discoverySelectors` (all when there are none).
pub fn namespace_filter(
    snapshot: &Snapshot,
    selectors: &[LabelSelector],
) -> Option<BTreeSet<String>> {
    if selectors.is_empty() {
        return None;
    }
    Some(
        snapshot
            .list(Kind::Namespace)
            .filter(|e| {
                selectors
                    .iter()
                    .any(|s| selector_matches(s, &e.config.metadata.labels))
            })
            .map(|e| e.config.metadata.name.clone())
            .collect(),
    )
}

/// `region/zone/subzone` of a node (the zone given by an EndpointSlice wins), possibly partial.
pub fn node_locality(node: Option<&Node>, zone: Option<&str>) -> String {
    let labels = node.and_then(|n| n.metadata.labels.as_ref());
    let get = |k: &str| labels.and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let region = get("topology.kubernetes.io/region");
    let zone = zone
        .map(str::to_string)
        .filter(|z| !z.is_empty())
        .unwrap_or_else(|| get("topology.kubernetes.io/zone"));
    let subzone = get("topology.istio.io/subzone");
    let parts = [region, zone, subzone];
    let last = parts
        .iter()
        .rposition(|p| !p.is_empty())
        .map_or(0, |i| i + 1);
    parts[..last].join("/")
}

/// A node of `cluster` by name (for localities). Nodes are cluster-scoped: stored without a
/// namespace.
pub fn node<'a>(snapshot: &'a Snapshot, cluster: &str, name: &str) -> Option<&'a Node> {
    match &snapshot.get_in(Kind::Node, cluster, "", name)?.config.spec {
        Spec::Node(n) => Some(n.as_ref()),
        _ => None,
    }
}

/// A running pod as a workload a ServiceEntry's `workloadSelector` selects (istiod selects pods as
/// well as WorkloadEntries): the pod as a WorkloadEntry (IP, labels, service account, its node's
/// locality), the workload it belongs to, and whether it is ready. Pods without an IP, finished or being deleted are left out;
/// host-network pods too (their IP is the node's).
pub fn pod_workload(
    snapshot: &Snapshot,
    config: &crate::config::Config,
    networks: &ClusterNetworks,
) -> Option<(crate::config::networking::WorkloadEntry, String, bool)> {
    let Spec::Pod(pod) = &config.spec else {
        return None;
    };
    let status = pod.status.as_ref()?;
    let ip = status.pod_ip.clone().filter(|ip| !ip.is_empty())?;
    let spec = pod.spec.as_ref();
    let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    if finished
        || pod.metadata.deletion_timestamp.is_some()
        || spec.and_then(|s| s.host_network) == Some(true)
    {
        return None;
    }
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let node_name = spec.and_then(|s| s.node_name.as_deref());
    let cluster = &config.metadata.cluster;
    let network = config
        .metadata
        .labels
        .get(NETWORK_LABEL)
        .map(String::as_str)
        .or_else(|| networks.network(cluster, &ip))
        .unwrap_or_default()
        .to_string();
    let entry = crate::config::networking::WorkloadEntry {
        address: ip,
        labels: config.metadata.labels.clone(),
        locality: node_locality(node_name.and_then(|n| node(snapshot, cluster, n)), None),
        service_account: spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into()),
        network,
        ..Default::default()
    };
    Some((entry, crate::model::workload::of_pod(pod).name, ready))
}

pub use super::network::NETWORK_LABEL;

/// The hostname of Kubernetes Service `namespace/name`.
pub fn service_hostname(namespace: &str, name: &str, domain_suffix: &str) -> String {
    format!("{name}.{namespace}.svc.{domain_suffix}")
}

/// The Service `(namespace, name)` a hostname would belong to, if it has a Service's shape.
pub fn service_of_hostname(hostname: &str, domain_suffix: &str) -> Option<(String, String)> {
    let rest = hostname
        .strip_suffix(domain_suffix)?
        .strip_suffix(".svc.")?;
    let (name, namespace) = rest.split_once('.')?;
    (!name.is_empty() && !namespace.is_empty() && !namespace.contains('.'))
        .then(|| (namespace.to_string(), name.to_string()))
}

/// The Service an EndpointSlice belongs to (its `kubernetes.io/service-name` label).
pub fn slice_service(config: &crate::config::Config) -> Option<&str> {
    config
        .metadata
        .labels
        .get("kubernetes.io/service-name")
        .map(String::as_str)
}

/// The pods an EndpointSlice's endpoints point at, as `(namespace, name)`.
pub fn slice_pods(config: &crate::config::Config) -> Vec<(String, String)> {
    let Spec::EndpointSlice(slice) = &config.spec else {
        return Vec::new();
    };
    slice
        .endpoints
        .iter()
        .filter_map(|ep| ep.target_ref.as_ref())
        .filter(|r| r.kind.as_deref() == Some("Pod"))
        .map(|r| {
            (
                r.namespace
                    .clone()
                    .unwrap_or_else(|| config.metadata.namespace.clone()),
                r.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Kubernetes Service `entry` as a service with its endpoints per port, from `slices` (its
/// EndpointSlices, of the same cluster), the pods they point at and the nodes those run on, all
/// read from the Service's cluster. `None` for a Service without a spec.
pub fn kubernetes_service(
    snapshot: &Snapshot,
    entry: &crate::config::Config,
    slices: &[&EndpointSlice],
    domain_suffix: &str,
    networks: &ClusterNetworks,
) -> Option<super::service::Built> {
    let Spec::Service(svc) = &entry.spec else {
        return None;
    };
    let (ns, name) = (&entry.metadata.namespace, &entry.metadata.name);
    let spec = svc.spec.as_ref()?;
    let hostname = service_hostname(ns, name, domain_suffix);
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let external = spec.type_.as_deref() == Some("ExternalName");
    let ports = service_ports(spec);
    let export_to = entry
        .metadata
        .annotations
        .get("networking.istio.io/exportTo")
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut endpoints = Vec::with_capacity(ports.len());
    for port in &ports {
        let mut eps: BTreeSet<Endpoint> = BTreeSet::new();
        if external && let Some(target) = &spec.external_name {
            eps.insert(Endpoint {
                address: target.clone(),
                port: port.number,
                weight: 1,
                healthy: true,
                namespace: ns.clone(),
                ..Default::default()
            });
        }
        slice_endpoints(snapshot, entry, slices, port, networks, &mut eps);
        endpoints.push((port.number, eps.into_iter().collect()));
    }
    let service = Service {
        hostname,
        namespace: ns.clone(),
        ports,
        // `clusterIPs` holds both families; objects written without it have only `clusterIP`.
        addresses: spec
            .cluster_ips
            .clone()
            .filter(|ips| !ips.is_empty())
            .or_else(|| spec.cluster_ip.clone().map(|ip| vec![ip]))
            .unwrap_or_default()
            .into_iter()
            .filter(|ip| ip != "None" && !ip.is_empty())
            .collect(),
        resolution: if external {
            Resolution::DNS
        } else if headless {
            Resolution::NONE
        } else {
            Resolution::STATIC
        },
        location: Location::MESH_INTERNAL,
        export_to,
        auto_allocated: Vec::new(),
        source: format!("Service/{ns}/{name}"),
        subject_alt_names: Vec::new(),
        labels: svc.metadata.labels.clone().unwrap_or_default(),
    };
    Some((service, endpoints))
}

/// A Service's ports as the mesh sees them (UDP left out), with their protocols.
fn service_ports(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Vec<ServicePort> {
    spec.ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") != "UDP")
        .map(|p| {
            let pname = p.name.clone().unwrap_or_default();
            ServicePort {
                protocol: port_protocol(p.port as u32, &pname, p.app_protocol.as_deref()),
                name: pname,
                number: p.port as u32,
                target_port: match &p.target_port {
                    Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => {
                        *n as u32
                    }
                    _ => 0,
                },
            }
        })
        .collect()
}

/// The endpoints `slices` give `port` of the Service `entry`: each ready or not, with its pod's
/// labels, service account, workload and network and its node's locality.
fn slice_endpoints(
    snapshot: &Snapshot,
    entry: &crate::config::Config,
    slices: &[&EndpointSlice],
    port: &ServicePort,
    networks: &ClusterNetworks,
    eps: &mut BTreeSet<Endpoint>,
) {
    let (ns, cluster) = (&entry.metadata.namespace, entry.metadata.cluster.as_str());
    let pod = |r: &k8s_openapi::api::core::v1::ObjectReference| -> Option<&Pod> {
        let namespace = r.namespace.as_deref().unwrap_or(ns);
        let name = r.name.as_deref().unwrap_or_default();
        match &snapshot
            .get_in(Kind::Pod, cluster, namespace, name)?
            .config
            .spec
        {
            Spec::Pod(p) => Some(p.as_ref()),
            _ => None,
        }
    };
    for slice in slices {
        let Some(slice_port) = slice
            .ports
            .iter()
            .flatten()
            .find(|sp| sp.name.as_deref().unwrap_or("") == port.name)
        else {
            continue;
        };
        let Some(number) = slice_port.port else {
            continue;
        };
        for ep in &slice.endpoints {
            let pod = ep
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(pod);
            let node = ep
                .node_name
                .as_deref()
                .or_else(|| pod.and_then(|p| p.spec.as_ref()?.node_name.as_deref()))
                .and_then(|n| node(snapshot, cluster, n));
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            for address in ep.addresses.iter().take(1) {
                eps.insert(Endpoint {
                    address: address.clone(),
                    port: number as u32,
                    labels: pod
                        .and_then(|p| p.metadata.labels.clone())
                        .unwrap_or_default(),
                    locality: node_locality(node, ep.zone.as_deref()),
                    weight: 1,
                    service_account: pod
                        .and_then(|p| p.spec.as_ref()?.service_account_name.clone())
                        .unwrap_or_default(),
                    network: pod
                        .and_then(|p| p.metadata.labels.as_ref()?.get(NETWORK_LABEL))
                        .map(String::as_str)
                        .or_else(|| networks.network(cluster, address))
                        .unwrap_or_default()
                        .to_string(),
                    cluster: cluster.to_string(),
                    healthy: ready,
                    workload: pod
                        .map(|p| crate::model::workload::of_pod(p).name)
                        .unwrap_or_default(),
                    namespace: pod
                        .and_then(|p| p.metadata.namespace.clone())
                        .unwrap_or_else(|| ns.clone()),
                });
            }
        }
    }
}

impl Default for Endpoint {
    fn default() -> Self {
        Endpoint {
            address: String::new(),
            port: 0,
            labels: BTreeMap::new(),
            locality: String::new(),
            weight: 1,
            service_account: String::new(),
            network: String::new(),
            cluster: String::new(),
            healthy: true,
            workload: String::new(),
            namespace: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_from_app_protocol_and_port_names() {
        assert_eq!(port_protocol(80, "http-web", None), Protocol::Http);
        assert_eq!(port_protocol(80, "grpc", None), Protocol::Grpc);
        assert_eq!(port_protocol(80, "grpc-web-x", None), Protocol::Grpc);
        assert_eq!(port_protocol(80, "web", Some("http2")), Protocol::Http2);
        assert_eq!(port_protocol(80, "tcp-db", None), Protocol::Tcp);
        assert_eq!(
            port_protocol(80, "x", Some("kubernetes.io/h2c")),
            Protocol::Http2
        );
        assert_eq!(
            port_protocol(443, "x", Some("kubernetes.io/wss")),
            Protocol::Https
        );
        // Nothing declared: sniffed, as istiod, but for its well-known TCP ports.
        assert_eq!(port_protocol(8080, "", None), Protocol::Unsupported);
        assert_eq!(port_protocol(8080, "web", None), Protocol::Unsupported);
        assert_eq!(port_protocol(3306, "", None), Protocol::Tcp);
        // appProtocol, when set, decides alone: the port name is not a fallback.
        assert_eq!(
            port_protocol(80, "http-web", Some("custom")),
            Protocol::Unsupported
        );
    }
}

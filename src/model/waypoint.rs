//! Ambient waypoints: which waypoint a service or workload uses, and which services a waypoint
//! proxy serves, as istiod's ambient index binds them. One rule for ztunnel's view
//! (`xds::generate::ambient`), the waypoint's own config (`xds::generate::waypoint`) and the
//! `istio.io/WaypointBound` status.

use super::{Registry, Service};
use std::collections::BTreeMap;

/// On a pod, service or namespace: the waypoint (a Gateway, by its Service's name) its traffic
/// goes through; `none` opts out.
pub const USE_WAYPOINT: &str = "istio.io/use-waypoint";
/// The namespace of that waypoint, when it is not the object's own.
pub const USE_WAYPOINT_NAMESPACE: &str = "istio.io/use-waypoint-namespace";
/// On a waypoint's Gateway (and its Service and pods): the traffic it takes, `service` by default.
pub const WAYPOINT_FOR: &str = "istio.io/waypoint-for";
/// Set on the objects of a gateway istiod's controllers manage.
pub const GATEWAY_MANAGED: &str = "gateway.istio.io/managed";
/// `gateway.istio.io/managed` of a waypoint.
pub const MESH_CONTROLLER: &str = "istio.io-mesh-controller";
/// `gateway.istio.io/managed` of a gateway deployed for the `istio` class.
pub const GATEWAY_CONTROLLER: &str = "istio.io-gateway-controller";
/// `gateway.istio.io/managed` of an ambient east-west gateway.
pub const EAST_WEST_CONTROLLER: &str = "istio.io-eastwest-controller";

/// On a Service or its namespace: ingress gateways send its traffic to its waypoint.
pub const INGRESS_USE_WAYPOINT: &str = "istio.io/ingress-use-waypoint";

/// Whether ingress gateways send `labels`' service (or its namespace's, `namespace_labels`)
/// to its waypoint: the service's label, else its namespace's, read as Go's `ParseBool`.
pub fn ingress_uses_waypoint(
    labels: &BTreeMap<String, String>,
    namespace_labels: Option<&BTreeMap<String, String>>,
) -> bool {
    labels
        .get(INGRESS_USE_WAYPOINT)
        .or_else(|| namespace_labels.and_then(|l| l.get(INGRESS_USE_WAYPOINT)))
        .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "TRUE" | "true" | "True"))
}

/// A waypoint an object names: the Gateway's name and namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaypointRef {
    pub name: String,
    pub namespace: String,
}

impl WaypointRef {
    /// The hostname of the waypoint's Service.
    pub fn hostname(&self, domain_suffix: &str) -> String {
        format!("{}.{}.svc.{domain_suffix}", self.name, self.namespace)
    }
}

/// Whether an object with these labels is itself a waypoint or an east-west gateway (which never
/// use a waypoint): managed as one, or of a waypoint's or east-west gateway's class (istiod's
/// waypoint Services carry the class label, not the managed one).
pub fn is_gateway(labels: &BTreeMap<String, String>) -> bool {
    labels
        .get(GATEWAY_MANAGED)
        .is_some_and(|v| v == MESH_CONTROLLER || v == EAST_WEST_CONTROLLER)
        || labels
            .get("gateway.networking.k8s.io/gateway-class-name")
            .is_some_and(|c| {
                c == "istio-waypoint" || c == crate::config::gateway_api::EAST_WEST_CLASS
            })
}

/// The waypoint an object's labels, or else its namespace's, name (with the namespace the same
/// source names, else the object's); `None` when neither names one or the object opts out.
pub fn named_waypoint(
    labels: &BTreeMap<String, String>,
    namespace_labels: Option<&BTreeMap<String, String>>,
    namespace: &str,
) -> Option<WaypointRef> {
    let (name, source) = match labels.get(USE_WAYPOINT) {
        Some(name) => (name, labels),
        None => {
            let ns_labels = namespace_labels?;
            (ns_labels.get(USE_WAYPOINT)?, ns_labels)
        }
    };
    if name.is_empty() || name == "none" {
        return None;
    }
    Some(WaypointRef {
        name: name.clone(),
        namespace: source
            .get(USE_WAYPOINT_NAMESPACE)
            .cloned()
            .unwrap_or_else(|| namespace.to_string()),
    })
}

/// What a waypoint accepts (`istio.io/waypoint-for` on its Service: `service` by default).
pub fn waypoint_for(waypoint_service: Option<&Service>) -> &str {
    waypoint_service
        .and_then(|s| s.labels.get(WAYPOINT_FOR))
        .map_or("service", String::as_str)
}

/// The waypoint `svc`'s traffic goes through: the one it (or its namespace) names, when that
/// waypoint takes service traffic (`service` or `all`). A waypoint's own Service uses none.
pub fn service_waypoint(
    svc: &Service,
    namespace_labels: Option<&BTreeMap<String, String>>,
    registry: &Registry,
    domain_suffix: &str,
) -> Option<WaypointRef> {
    if is_gateway(&svc.labels) {
        return None;
    }
    let waypoint = named_waypoint(&svc.labels, namespace_labels, &svc.namespace)?;
    taking(waypoint, "service", registry, domain_suffix)
}

/// `waypoint` when its `istio.io/waypoint-for` takes `traffic` (`service` or `workload`): that
/// kind, or `all`.
fn taking(
    waypoint: WaypointRef,
    traffic: &str,
    registry: &Registry,
    domain_suffix: &str,
) -> Option<WaypointRef> {
    let accepts = waypoint_for(
        registry
            .services
            .get(&waypoint.hostname(domain_suffix))
            .map(AsRef::as_ref),
    );
    (accepts == traffic || accepts == "all").then_some(waypoint)
}

/// The waypoint a workload's traffic goes through: the one its own labels name (a namespace's
/// waypoint is for service traffic), when that waypoint takes workload traffic (`workload` or
/// `all`).
pub fn workload_waypoint(
    labels: &BTreeMap<String, String>,
    namespace: &str,
    registry: &Registry,
    domain_suffix: &str,
) -> Option<WaypointRef> {
    if is_gateway(labels) {
        return None;
    }
    let waypoint = named_waypoint(labels, None, namespace)?;
    taking(waypoint, "workload", registry, domain_suffix)
}

/// The services a waypoint serves: those whose waypoint is the Service `waypoint_host` (the
/// waypoint proxy's own Service) in `namespace`, in creation order as istiod orders them (here:
/// by hostname, stable).
pub fn services_for<'a>(
    registry: &'a Registry,
    namespace_labels: &dyn Fn(&str) -> Option<&'a BTreeMap<String, String>>,
    waypoint_hosts: &[&str],
    domain_suffix: &str,
) -> Vec<&'a std::sync::Arc<Service>> {
    registry
        .services
        .values()
        .filter(|svc| {
            service_waypoint(
                svc,
                namespace_labels(&svc.namespace),
                registry,
                domain_suffix,
            )
            .is_some_and(|w| {
                let host = w.hostname(domain_suffix);
                waypoint_hosts.contains(&host.as_str())
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_object_label_wins_over_the_namespace_and_none_opts_out() {
        let ns = labels(&[(USE_WAYPOINT, "ns-wp"), (USE_WAYPOINT_NAMESPACE, "infra")]);
        let own = labels(&[(USE_WAYPOINT, "mine")]);
        assert_eq!(
            named_waypoint(&own, Some(&ns), "shop"),
            Some(WaypointRef {
                name: "mine".into(),
                namespace: "shop".into()
            }),
            "the namespace of the label's own source"
        );
        assert_eq!(
            named_waypoint(&BTreeMap::new(), Some(&ns), "shop"),
            Some(WaypointRef {
                name: "ns-wp".into(),
                namespace: "infra".into()
            })
        );
        assert_eq!(
            named_waypoint(&labels(&[(USE_WAYPOINT, "none")]), Some(&ns), "shop"),
            None
        );
        assert!(is_gateway(&labels(&[(GATEWAY_MANAGED, MESH_CONTROLLER)])));
        assert!(is_gateway(&labels(&[(
            "gateway.networking.k8s.io/gateway-class-name",
            "istio-waypoint"
        )])));
    }
}

//! The service model: what services exist and where their endpoints are, built from the store.
//!
//! From Kubernetes Services with their EndpointSlices, and ServiceEntries with their own endpoints
//! or the WorkloadEntries and pods they select (`registry`). Hostnames are fully qualified; ports
//! carry their protocol.

pub mod delegate;
pub mod gateway_api;
pub mod identity;
pub mod ingress;
pub mod judged;
pub mod kubernetes;
pub mod l4_policy;
pub mod mesh;
pub mod network;
pub mod origin;
pub mod peer_auth;
pub mod policy;
mod registry;
mod service;
pub mod telemetry;
pub mod waypoint;
pub mod workload;

pub use registry::{Registry, RegistryDelta};
pub use service::{Endpoint, Protocol, Service, ServicePort, resolve_host};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Kind, Spec};
    use crate::store::{Store, StoreWriter};
    use std::collections::BTreeMap;

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

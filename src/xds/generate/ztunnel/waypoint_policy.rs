//! istiod's implicit waypoint policies (PILOT_AUTO_ALLOW_WAYPOINT_POLICY, off by default): for
//! each waypoint with running instances, an ALLOW policy of its identities, referenced by every
//! workload behind it, so a client reaching the workload directly is refused unless another ALLOW
//! admits it.

use super::fields::non_empty;
use super::index::AmbientIndex;
use super::{PortList, authorization};
use crate::config::{Kind, Spec};
use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::Snapshot;
use std::collections::BTreeMap;

impl AmbientIndex {
    /// istiod's `implicitWaypointPolicies`: the keys of the implicit ALLOW policies of the
    /// waypoints a workload is behind (its own waypoint, and its services'), each added once. A
    /// waypoint without running instances (no identity to allow) has none, as istiod. None at
    /// all unless the mesh turns the rule on.
    pub(super) fn waypoint_policies(
        &mut self,
        (snapshot, registry, mesh): (&Snapshot, &Registry, &MeshSettings),
        (namespace, labels, ns_labels): (
            &str,
            &BTreeMap<String, String>,
            Option<&BTreeMap<String, String>>,
        ),
        services: &BTreeMap<String, PortList>,
    ) -> Vec<String> {
        use crate::model::waypoint::{service_waypoint, workload_waypoint};
        if !mesh.auto_allow_waypoint_policy {
            return Vec::new();
        }
        let domain = &mesh.domain_suffix;
        let mut waypoints: std::collections::BTreeSet<crate::model::waypoint::WaypointRef> =
            services
                .keys()
                .filter_map(|key| key.split_once('/'))
                .filter_map(|(_, host)| registry.services.get(host))
                .filter_map(|svc| service_waypoint(svc, ns_labels, registry, domain))
                .collect();
        waypoints.extend(workload_waypoint(labels, namespace, registry, domain));
        let mut keys = Vec::new();
        for waypoint in waypoints {
            let key = format!(
                "{}/{}",
                waypoint.namespace,
                authorization::waypoint_policy_name(&waypoint)
            );
            if !self.policies.contains_key(&key) {
                let accounts = waypoint_service_accounts(snapshot, &waypoint);
                if accounts.is_empty() {
                    continue;
                }
                self.add_policy(authorization::allow_from_waypoint(
                    &waypoint,
                    &mesh.trust_domain,
                    &accounts,
                ));
            }
            keys.push(key);
        }
        keys
    }
}

/// The service accounts a waypoint's instances run as (its pods and WorkloadEntries labelled with
/// its Gateway's name), sorted: the identities its implicit policy allows.
fn waypoint_service_accounts(
    snapshot: &Snapshot,
    waypoint: &crate::model::waypoint::WaypointRef,
) -> Vec<String> {
    const GATEWAY_NAME: &str = "gateway.networking.k8s.io/gateway-name";
    let ours = |labels: &BTreeMap<String, String>| labels.get(GATEWAY_NAME) == Some(&waypoint.name);
    let pods = snapshot
        .list_namespace(Kind::Pod, &waypoint.namespace)
        .filter(|e| e.config.metadata.cluster.is_empty() && ours(&e.config.metadata.labels))
        .filter_map(|e| match &e.config.spec {
            Spec::Pod(p) => Some(
                p.spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.clone())
                    .unwrap_or_else(|| "default".into()),
            ),
            _ => None,
        });
    let entries = snapshot
        .list_namespace(Kind::WorkloadEntry, &waypoint.namespace)
        .filter_map(|e| match &e.config.spec {
            Spec::WorkloadEntry(we) if ours(&we.labels) || ours(&e.config.metadata.labels) => {
                Some(non_empty(&we.service_account, "default"))
            }
            _ => None,
        });
    let set: std::collections::BTreeSet<String> = pods.chain(entries).collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{k8s, store};
    use super::super::{AmbientIndex, pb};
    use crate::model::Registry;
    use crate::model::mesh::MeshSettings;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    /// istiod's PILOT_AUTO_ALLOW_WAYPOINT_POLICY: each waypoint with running instances gets an ALLOW
    /// policy of its identity, and every workload behind it (here, through its service) references
    /// it, so a client skipping the waypoint is refused unless another ALLOW admits it. Off by
    /// default, as istiod.
    #[test]
    fn workloads_behind_a_waypoint_allow_its_identity_when_asked() {
        let store = store();
        store.upsert(k8s::<Pod>(json!({
            "metadata": {"name": "wp-0", "namespace": "amb",
                "labels": {"gateway.networking.k8s.io/gateway-name": "wp", "istio.io/dataplane-mode": "none"}},
            "spec": {"serviceAccountName": "wp", "containers": [{"name": "istio-proxy"}]},
            "status": {"phase": "Running", "podIP": "10.1.0.9", "podIPs": [{"ip": "10.1.0.9"}],
                "conditions": [{"type": "Ready", "status": "True"}]}
        })));
        let snapshot = store.snapshot();
        let registry = Registry::build(&snapshot, "cluster.local");
        let key = "amb/istio_allow_waypoint_amb_wp";

        let off = AmbientIndex::build(&snapshot, &registry, &MeshSettings::default());
        assert!(!off.policies.contains_key(key));
        assert!(
            !off.workloads["Kubernetes//Pod/amb/web-0"]
                .authorization_policies
                .iter()
                .any(|p| p == key)
        );

        let mesh = MeshSettings {
            auto_allow_waypoint_policy: true,
            ..Default::default()
        };
        let on = AmbientIndex::build(&snapshot, &registry, &mesh);
        let policy = &on.policies[key];
        assert_eq!(policy.action, pb::security::Action::Allow as i32);
        assert!(
            format!("{policy:?}").contains("cluster.local/ns/amb/sa/wp"),
            "{policy:?}"
        );
        let web = &on.workloads["Kubernetes//Pod/amb/web-0"];
        assert!(
            web.authorization_policies.iter().any(|p| p == key),
            "{:?}",
            web.authorization_policies
        );
        // A workload behind no waypoint references none.
        let db = &on.workloads["Kubernetes//Pod/plain/db-0"];
        assert!(
            !db.authorization_policies
                .iter()
                .any(|p| p.contains("istio_allow_waypoint"))
        );
    }
}

//! The push decision, kept pure so it can be tested on its own: from the kinds that changed and
//! what changed in the registry, whether to push at all, and whether a partial push (endpoints,
//! ambient addresses, secrets) is enough.

use crate::config::Kind;
use crate::config::networking::Resolution;
use crate::model::{Registry, RegistryDelta};
use crate::xds::types::TypeUrl;
use std::collections::BTreeSet;

/// What a debounced batch of changes calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Every watched type is regenerated.
    pub full: bool,
    /// For a partial push, the types it carries.
    pub types: BTreeSet<TypeUrl>,
    /// Services whose endpoints changed.
    pub eds_hosts: BTreeSet<String>,
    /// `config`, `endpoint` or `secret` (`pilot_push_triggers{type}`).
    pub reason: &'static str,
}

/// Kinds whose changes can only move endpoints.
fn endpoint_kind(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::ServiceEntry | Kind::WorkloadEntry | Kind::EndpointSlice | Kind::Pod | Kind::Service
    )
}

/// `None`: the changes affect nothing any proxy is sent. `lagged`: events were lost, so nothing
/// about them is known and everything is pushed. `delta` is what changed between the registry
/// before and `new`.
pub fn decide(
    kinds: &BTreeSet<Kind>,
    lagged: bool,
    delta: RegistryDelta,
    new: &Registry,
) -> Option<Decision> {
    let RegistryDelta {
        eds_hosts,
        services_changed,
    } = delta;
    let all_static = eds_hosts.iter().all(|h| {
        new.services
            .get(h)
            .is_some_and(|s| s.resolution == Resolution::STATIC)
    });
    // Secrets reach only the proxies that asked for them (SDS), like endpoints.
    let secrets = kinds.contains(&Kind::Secret);
    let partial = !lagged
        && kinds
            .iter()
            .all(|k| endpoint_kind(*k) || *k == Kind::Secret)
        && !services_changed
        && all_static;
    // Pods and workload entries are ambient workloads even when no endpoint moved.
    let addresses = kinds
        .iter()
        .any(|k| matches!(k, Kind::Pod | Kind::WorkloadEntry))
        || !eds_hosts.is_empty();
    if partial && eds_hosts.is_empty() && !addresses && !secrets {
        return None;
    }
    let reason = match (partial, secrets && eds_hosts.is_empty() && !addresses) {
        (true, true) => "secret",
        (true, false) => "endpoint",
        _ => "config",
    };
    let types = [
        (!eds_hosts.is_empty(), TypeUrl::Endpoint),
        (addresses, TypeUrl::Address),
        (secrets, TypeUrl::Secret),
    ]
    .into_iter()
    .filter_map(|(changed, t)| changed.then_some(t))
    .collect();
    Some(Decision {
        full: !partial,
        types,
        eds_hosts,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    const SERVICE: &str = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: shop}
spec:
  hosts: [db.shop.svc.cluster.local]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
";

    fn registry(yaml: &str) -> Registry {
        let store = Store::from_yaml(yaml);
        Registry::build(&store.snapshot(), "cluster.local")
    }

    /// The decision for two registries compared whole.
    fn between(
        kinds: &BTreeSet<Kind>,
        lagged: bool,
        old: &Registry,
        new: &Registry,
    ) -> Option<Decision> {
        decide(kinds, lagged, old.delta(new), new)
    }

    fn kinds(k: &[Kind]) -> BTreeSet<Kind> {
        k.iter().copied().collect()
    }

    #[test]
    fn an_endpoint_move_is_a_partial_push_of_endpoints_and_addresses() {
        let old = registry(SERVICE);
        let new = registry(&SERVICE.replace("10.0.0.1", "10.0.0.2"));
        let d = between(&kinds(&[Kind::ServiceEntry]), false, &old, &new).unwrap();
        assert!(!d.full);
        assert_eq!(d.reason, "endpoint");
        assert_eq!(d.types, [TypeUrl::Endpoint, TypeUrl::Address].into());
        assert_eq!(
            d.eds_hosts,
            ["db.shop.svc.cluster.local".to_string()].into()
        );
    }

    #[test]
    fn changed_endpoints_names_added_removed_and_moved_services_only() {
        let entry = |name: &str, ip: &str| SERVICE.replace("db", name).replace("10.0.0.1", ip);
        let old = registry(
            &[
                entry("a", "10.0.0.1"),
                entry("b", "10.0.0.2"),
                entry("d", "10.0.0.4"),
            ]
            .join("---\n"),
        );
        let new = registry(
            &[
                entry("b", "10.0.0.3"),
                entry("c", "10.0.0.5"),
                entry("d", "10.0.0.4"),
            ]
            .join("---\n"),
        );
        let host = |h: &str| format!("{h}.shop.svc.cluster.local");
        assert_eq!(
            old.changed_endpoints(&new),
            [host("a"), host("b"), host("c")].into(),
            "removed, moved and added; not the unchanged"
        );
        assert!(old.changed_endpoints(&old).is_empty());
    }

    #[test]
    fn nothing_changed_pushes_nothing_and_lost_events_push_everything() {
        let old = registry(SERVICE);
        let same = registry(SERVICE);
        assert_eq!(
            between(&kinds(&[Kind::ServiceEntry]), false, &old, &same),
            None
        );
        let d = between(&kinds(&[Kind::ServiceEntry]), true, &old, &same).unwrap();
        assert!(d.full, "a lagged event bus is a full push");
    }

    #[test]
    fn routing_kinds_and_new_services_are_full_pushes() {
        let old = registry(SERVICE);
        let d = between(&kinds(&[Kind::VirtualService]), false, &old, &old).unwrap();
        assert!(d.full);
        assert_eq!(d.reason, "config");
        let more = registry(&format!(
            "{SERVICE}---\n{}",
            SERVICE
                .replace("name: db", "name: cache")
                .replace("db.shop", "cache.shop")
        ));
        assert!(
            between(&kinds(&[Kind::ServiceEntry]), false, &old, &more)
                .unwrap()
                .full
        );
    }

    #[test]
    fn a_label_change_on_a_service_is_pushed() {
        // `istio.io/use-waypoint` removed: ztunnel must hear of it although no endpoint moved.
        let with = registry(&SERVICE.replace(
            "metadata: {name: db, namespace: shop}",
            "metadata: {name: db, namespace: shop, labels: {istio.io/use-waypoint: wp}}",
        ));
        let without = registry(SERVICE);
        let d = between(&kinds(&[Kind::ServiceEntry]), false, &with, &without)
            .expect("the label change is pushed");
        assert!(d.full);
    }

    #[test]
    fn a_secret_change_pushes_only_secrets() {
        let old = registry(SERVICE);
        let d = between(&kinds(&[Kind::Secret]), false, &old, &old).unwrap();
        assert!(!d.full);
        assert_eq!(d.reason, "secret");
        assert_eq!(d.types, [TypeUrl::Secret].into());
    }
}

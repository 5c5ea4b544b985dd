//! Which Telemetry resources apply to a workload, as istiod attaches them: the root namespace's
//! namespace-wide one, then its own namespace's, then one selecting or targeting it; at a
//! waypoint, one of the served service's namespace targeting that Service or ServiceEntry. Of
//! several at one level the oldest wins. Access logs, tracing and stats read the same list.

use super::policy::{Attachment, Workload, attachable, attaches, levels, oldest_first};
use crate::config::telemetry::Telemetry;
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use std::sync::Arc;

/// The Telemetries that apply to `workload`, outermost first (root, namespace, workload, and at
/// a waypoint the served service's). A waypoint never takes one by selector.
pub fn applicable<'a>(
    snapshot: &'a Snapshot,
    root_namespace: &str,
    workload: &Workload,
) -> Vec<&'a Telemetry> {
    let telemetry = |c: &'a Arc<Config>| match &c.spec {
        Spec::Telemetry(t) => Some(t),
        _ => None,
    };
    let found = levels(snapshot, Kind::Telemetry, root_namespace, workload);
    let mut out: Vec<&Telemetry> = [found.root, found.namespace, found.workload]
        .into_iter()
        .flatten()
        .filter_map(telemetry)
        .collect();
    if let Some(svc) = workload.service.filter(|_| workload.waypoint) {
        out.extend(
            oldest_first(snapshot, Kind::Telemetry, svc.namespace)
                .into_iter()
                .find(|c| {
                    attachable(&c.spec).is_some_and(|t| {
                        attaches(svc.namespace, t, root_namespace, workload)
                            == Some(Attachment::Service)
                    })
                })
                .and_then(telemetry),
        );
    }
    out
}

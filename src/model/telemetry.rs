//! Which Telemetry resources apply to a workload, as istiod attaches them: the root namespace's
//! namespace-wide one, then its own namespace's, then one selecting or targeting it; at a
//! waypoint, one of the served service's namespace targeting that Service or ServiceEntry. Of
//! several at one level the oldest wins. Access logs, tracing and stats read the same list.

use super::policy::{Attachment, Workload, attaches, oldest_first};
use crate::config::telemetry::Telemetry;
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;

/// The Telemetries that apply to `workload`, outermost first (root, namespace, workload, and at
/// a waypoint the served service's). A waypoint never takes one by selector.
pub fn applicable<'a>(
    snapshot: &'a Snapshot,
    root_namespace: &str,
    workload: &Workload,
) -> Vec<&'a Telemetry> {
    let in_ns = |ns: &str| -> Vec<(&'a Config, &'a Telemetry)> {
        oldest_first(snapshot, Kind::Telemetry, ns)
            .into_iter()
            .filter_map(|c| match &c.spec {
                Spec::Telemetry(t) => Some((c.as_ref(), t)),
                _ => None,
            })
            .collect()
    };
    let mut out = Vec::new();
    out.extend(
        in_ns(root_namespace)
            .into_iter()
            .map(|(_, t)| t)
            .find(|t| namespace_wide(t)),
    );
    let own = in_ns(workload.namespace);
    if workload.namespace != root_namespace {
        out.extend(own.iter().map(|(_, t)| *t).find(|t| namespace_wide(t)));
    }
    out.extend(own.iter().map(|(_, t)| *t).find(|t| {
        matches!(
            attaches(workload.namespace, *t, root_namespace, workload),
            Some(Attachment::Selector | Attachment::TargetRef)
        )
    }));
    if let Some(svc) = workload.service.filter(|_| workload.waypoint) {
        let theirs = in_ns(svc.namespace);
        out.extend(theirs.iter().map(|(_, t)| *t).find(|t| {
            attaches(svc.namespace, *t, root_namespace, workload) == Some(Attachment::Service)
        }));
    }
    out
}

/// Without a selector (or with an empty one) and without targets: for its whole namespace.
fn namespace_wide(t: &Telemetry) -> bool {
    t.target_ref.is_none()
        && t.target_refs.is_empty()
        && t.selector
            .as_ref()
            .is_none_or(|s| s.match_labels.is_empty())
}

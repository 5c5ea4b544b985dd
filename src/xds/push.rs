//! The push pipeline: store events are debounced (quiet period, max delay), then a new push context is
//! built and queued for every proxy. Changes that only move endpoints become EDS-only pushes.

use super::context::{MeshSettings, PushContext};
use super::generate;
use super::server::{PushRecord, PushRequest, XdsShared};
use crate::config::Kind;
use crate::config::networking::Resolution;
use crate::metrics::{Metrics, TypeLabels};
use crate::model::Registry;
use crate::store::Store;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

#[derive(Debug, Clone, Copy)]
pub struct Debounce {
    /// A push waits until no change arrived for this long...
    pub quiet: Duration,
    /// ...but never longer than this after the first change.
    pub max: Duration,
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            quiet: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

/// How often workload certificates served over SDS are looked at again: one past half its life
/// is reissued and pushed (a proxy with an agent would rotate its own).
const CERTIFICATE_REFRESH: Duration = Duration::from_secs(600);

/// Kinds whose changes can only move endpoints.
fn endpoint_kind(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::ServiceEntry | Kind::WorkloadEntry | Kind::EndpointSlice | Kind::Pod | Kind::Service
    )
}

/// The mesh settings and registry for a snapshot: MeshConfig applied, discoverySelectors honoured.
fn build(snapshot: &crate::store::Snapshot, base: &MeshSettings) -> (MeshSettings, Registry) {
    let (mesh, error) = base.with_mesh_config(snapshot);
    if let Some(e) = error {
        warn!(error = %e, "invalid mesh config; keeping the previous settings");
    }
    let registry = Registry::build_with(snapshot, &mesh.domain_suffix, &mesh.discovery_selectors);
    (mesh, registry)
}

/// Builds the first push context from the store as it is now.
pub fn initial_context(store: &Store, base: &MeshSettings) -> PushContext {
    let snapshot = store.snapshot();
    let (mesh, registry) = build(&snapshot, base);
    PushContext::new(1, snapshot, Arc::new(registry), mesh)
}

/// `events` must be subscribed before the initial push context was built, so nothing falls between.
pub async fn run(
    store: Arc<Store>,
    mut events: tokio::sync::broadcast::Receiver<crate::store::Event>,
    shared: Arc<XdsShared>,
    mesh: MeshSettings,
    debounce: Debounce,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    let mut version = shared.context().version;
    let mut registry = shared.context().registry.clone();
    metrics.services.set(registry.services.len() as i64);
    let mut refresh = tokio::time::interval(CERTIFICATE_REFRESH);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    refresh.tick().await;
    loop {
        let mut kinds = BTreeSet::new();
        let mut triggers: Vec<String> = Vec::new();
        let mut lagged = false;
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = refresh.tick() => {
                kinds.insert(Kind::Secret);
                triggers.push("workload certificate refresh".into());
            }
            ev = events.recv() => match ev {
                Ok(ev) => { kinds.insert(ev.key.kind); triggers.push(format!("{:?} {}", ev.kind, ev.key)); }
                Err(RecvError::Lagged(_)) => lagged = true,
                Err(RecvError::Closed) => break,
            },
        }
        let started = Instant::now();
        let mut quiet_until = started + debounce.quiet;
        let max_until = started + debounce.max;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(quiet_until.min(max_until)) => break,
                ev = events.recv() => {
                    match ev {
                        Ok(ev) => {
                            kinds.insert(ev.key.kind);
                            if triggers.len() < 20 {
                                triggers.push(format!("{:?} {}", ev.kind, ev.key));
                            }
                        }
                        Err(RecvError::Lagged(_)) => lagged = true,
                        Err(RecvError::Closed) => return,
                    }
                    quiet_until = Instant::now() + debounce.quiet;
                }
            }
        }
        let debounce_elapsed = started.elapsed();
        metrics
            .debounce_time
            .observe(debounce_elapsed.as_secs_f64());
        if lagged {
            triggers.push("event bus lagged: full resync".into());
        }
        let span = info_span!("push", version = version + 1);
        async {
            let snapshot = store.snapshot();
            let (next_mesh, next) = build(&snapshot, &mesh);
            let next = Arc::new(next);
            let eds_hosts = registry.changed_endpoints(&next);
            let all_eds = eds_hosts.iter().all(|h| {
                next.services
                    .get(h)
                    .is_some_and(|s| s.resolution == Resolution::STATIC)
            });
            // Secrets reach only the proxies that asked for them (SDS), like endpoints.
            let secrets = kinds.contains(&Kind::Secret);
            let eds_only = !lagged
                && kinds
                    .iter()
                    .all(|k| endpoint_kind(*k) || *k == Kind::Secret)
                && registry.same_services(&next)
                && all_eds;
            // Pods and workload entries are ambient workloads even when no endpoint moved.
            let addresses = kinds
                .iter()
                .any(|k| matches!(k, Kind::Pod | Kind::WorkloadEntry))
                || !eds_hosts.is_empty();
            if eds_only && eds_hosts.is_empty() && !addresses && !secrets {
                debug!(
                    ?kinds,
                    "change affects no service or endpoint; nothing to push"
                );
                registry = next;
                return;
            }
            version += 1;
            let reason = match (eds_only, secrets && eds_hosts.is_empty() && !addresses) {
                (true, true) => "secret",
                (true, false) => "endpoint",
                _ => "config",
            };
            metrics
                .push_triggers
                .get_or_create(&TypeLabels {
                    r#type: reason.into(),
                })
                .inc();
            metrics.services.set(next.services.len() as i64);
            info!(
                full = !eds_only,
                eds_services = eds_hosts.len(),
                ?kinds,
                "pushing"
            );
            let context = PushContext::new(version, snapshot, next.clone(), next_mesh);
            let record = PushRecord {
                version,
                at_unix_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0),
                full: !eds_only,
                reason: reason.into(),
                triggers: std::mem::take(&mut triggers),
                eds_services: eds_hosts.iter().cloned().collect(),
                proxies: 0,
                debounce_ms: debounce_elapsed.as_millis(),
            };
            let request = PushRequest {
                full: !eds_only,
                types: [
                    (!eds_hosts.is_empty(), generate::ENDPOINT),
                    (addresses, generate::ADDRESS),
                    (secrets, generate::SECRET),
                ]
                .into_iter()
                .filter_map(|(changed, t)| changed.then_some(t))
                .collect(),
                eds_hosts,
                started: started.into_std(),
                reason: reason.into(),
                queued: std::time::Instant::now(),
            };
            shared.push(context, request, record);
            registry = next;
        }
        .instrument(span)
        .await;
    }
}

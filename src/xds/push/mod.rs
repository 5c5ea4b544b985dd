//! The push pipeline: store events are debounced (quiet period, max delay), the batch is judged by
//! `decide`, and a new push context with its request goes to a `PushSink` (the server's fan-out).
//! This module never names the server.

pub mod decide;
pub mod request;

use crate::config::Kind;
use crate::metrics::TypeLabels;
use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::Store;
use crate::xds::context::{Certificates, PushContext};
use crate::xds::metrics::XdsMetrics;
use crate::xds::types::TypeUrl;
use request::{PushRecord, PushRequest};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, info_span, warn};

/// Where pushes go: the server installs the context and queues the request for the proxies it
/// concerns.
pub trait PushSink: Send + Sync {
    fn push(&self, context: PushContext, request: PushRequest, record: PushRecord);
}

#[derive(Debug, Clone, Copy)]
pub struct Debounce {
    /// A push waits until no change arrived for this long...
    pub quiet: Duration,
    /// ...but never longer than this after the first change.
    pub max: Duration,
    /// Whether changes to endpoints alone (EndpointSlices, pods) wait for the quiet period too
    /// (istiod: PILOT_ENABLE_EDS_DEBOUNCE). Off, they are pushed as they come: under steady
    /// churn there is never a quiet period, so every batch would otherwise wait `max`.
    pub endpoints: bool,
}

/// istiod's `pilot_inbound_updates` type of a change: endpoints (EDS updates), a Kubernetes
/// Service added, changed or removed, or configuration (everything else).
fn inbound_update_type(ev: &crate::store::Event) -> &'static str {
    match ev.key.kind {
        Kind::EndpointSlice | Kind::Pod | Kind::WorkloadEntry => "eds",
        Kind::Service if ev.kind == crate::store::EventKind::Deleted => "svcdelete",
        Kind::Service => "svc",
        _ => "config",
    }
}

/// Kinds whose changes alter only endpoints, which `Debounce::endpoints` off pushes at once
/// (istiod's EDS updates). Narrower than `decide`'s kinds that can only move endpoints: a
/// ServiceEntry or Service edit is config, debounced as istiod does.
fn eds_update_kind(kind: &Kind) -> bool {
    matches!(kind, Kind::EndpointSlice | Kind::Pod)
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            quiet: Duration::from_millis(100),
            max: Duration::from_secs(10),
            endpoints: true,
        }
    }
}

/// How often workload certificates served over SDS are looked at again: one past half its life
/// is reissued and pushed (a proxy with an agent would rotate its own).
const CERTIFICATE_REFRESH: Duration = Duration::from_secs(600);

/// The mesh settings for a snapshot: MeshConfig applied to `base` (the flags). A mesh config that
/// cannot be read keeps `previous` (the settings in force), as files mode keeps the last good
/// file: falling back to the flags would drop discoverySelectors, REGISTRY_ONLY and the exportTo
/// defaults in one push. Without previous settings (at start) the flags apply.
fn mesh_settings(
    snapshot: &crate::store::Snapshot,
    base: &MeshSettings,
    previous: Option<&MeshSettings>,
    metrics: Option<&XdsMetrics>,
) -> MeshSettings {
    let (mesh, error) = base.with_mesh_config(snapshot);
    let Some(e) = error else {
        return mesh;
    };
    if let Some(m) = metrics {
        m.push.mesh_config_errors.inc();
    }
    match previous {
        Some(previous) => {
            warn!(error = %e, "invalid mesh config; keeping the previous settings");
            previous.clone()
        }
        None => {
            warn!(error = %e, "invalid mesh config; using the defaults until a valid one arrives");
            mesh
        }
    }
}

/// The mesh settings and registry for a snapshot: MeshConfig applied, discoverySelectors honoured.
fn build(snapshot: &crate::store::Snapshot, base: &MeshSettings) -> (MeshSettings, Registry) {
    let mesh = mesh_settings(snapshot, base, None, None);
    let registry = Registry::build_with(
        snapshot,
        &mesh.domain_suffix,
        &mesh.discovery_selectors,
        &mesh.cluster_networks,
    );
    (mesh, registry)
}

/// Builds the first push context from the store as it is now.
pub fn initial_context(
    store: &Store,
    base: &MeshSettings,
    certificates: Certificates,
) -> PushContext {
    let snapshot = store.snapshot();
    let (mesh, registry) = build(&snapshot, base);
    PushContext::new(1, snapshot, Arc::new(registry), mesh).with_certificates(certificates)
}

/// What the push loop starts from: the version, snapshot and registry of the context the server was
/// started with, the certificates every context it builds serves, and the mesh settings before
/// MeshConfig.
pub struct Start {
    pub version: u64,
    pub snapshot: Arc<crate::store::Snapshot>,
    pub registry: Arc<Registry>,
    pub routing: Arc<crate::xds::context::Routing>,
    pub certificates: Certificates,
    pub mesh: MeshSettings,
    /// The CA's trust bundle: a new one (a root rotation) pushes SDS (`ROOTCA`, and chains that
    /// end at the new root) to every proxy.
    pub roots: Option<tokio::sync::watch::Receiver<Arc<str>>>,
    /// The mesh settings of the initial context (MeshConfig applied).
    pub applied_mesh: MeshSettings,
    /// Where each round publishes what it judged, for the status writers.
    pub judged: Option<crate::model::judged::JudgedSender>,
}

impl Start {
    pub fn from(initial: &PushContext, mesh: MeshSettings) -> Start {
        Start {
            version: initial.version,
            snapshot: initial.snapshot.clone(),
            registry: initial.registry.clone(),
            routing: initial.routing.clone(),
            certificates: initial.certificates.clone(),
            mesh,
            roots: None,
            applied_mesh: initial.mesh.clone(),
            judged: None,
        }
    }
}

/// Resolves when the trust bundle changes; never when there is none to follow.
async fn root_changed(roots: &mut Option<tokio::sync::watch::Receiver<Arc<str>>>) {
    if let Some(rx) = roots.as_mut()
        && rx.changed().await.is_ok()
    {
        return;
    }
    *roots = None;
    std::future::pending::<()>().await
}

/// `events` must be subscribed before the initial push context was built, so nothing falls between.
pub async fn run(
    store: Arc<Store>,
    mut events: tokio::sync::broadcast::Receiver<crate::store::Event>,
    sink: Arc<dyn PushSink>,
    start: Start,
    debounce: Debounce,
    metrics: Arc<XdsMetrics>,
    cancel: CancellationToken,
) {
    let mut start = start;
    let mut roots = start.roots.take();
    let mut pipeline = Pipeline::new(store, sink, start, metrics);
    let mut refresh = tokio::time::interval(CERTIFICATE_REFRESH);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    refresh.tick().await;
    loop {
        let mut batch = Batch::default();
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = refresh.tick() => batch.add_secret_trigger("workload certificate refresh"),
            _ = root_changed(&mut roots) => batch.add_secret_trigger("CA root changed"),
            ev = events.recv() => match ev {
                Ok(ev) => batch.add(&ev, &pipeline.metrics),
                Err(RecvError::Lagged(_)) => batch.lagged = true,
                Err(RecvError::Closed) => break,
            },
        }
        if !batch
            .debounce(&mut events, debounce, &cancel, &pipeline.metrics)
            .await
        {
            return;
        }
        let span = info_span!("push", version = pipeline.version + 1);
        span.in_scope(|| pipeline.round(batch));
    }
}

/// The changes one push round answers: their kinds, the first few as triggers, whether the event
/// bus dropped some (a full resync), and when the first arrived.
struct Batch {
    kinds: BTreeSet<Kind>,
    triggers: Vec<String>,
    lagged: bool,
    started: Instant,
    debounced_for: Duration,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            kinds: BTreeSet::new(),
            triggers: Vec::new(),
            lagged: false,
            started: Instant::now(),
            debounced_for: Duration::ZERO,
        }
    }
}

impl Batch {
    /// Adds a store event to the batch being collected: its kind, and the first few as triggers.
    fn add(&mut self, ev: &crate::store::Event, metrics: &XdsMetrics) {
        metrics
            .push
            .inbound_updates
            .get_or_create(&TypeLabels {
                r#type: inbound_update_type(ev).into(),
            })
            .inc();
        // Of the ConfigMaps, only the mesh config changes what proxies are sent beyond SDS: the
        // others (CA bundles a BackendTLSPolicy names, the injector's, root certificates) are
        // judged as secrets, an SDS push, not a full one.
        let kind = match ev.key.kind {
            Kind::ConfigMap if ev.key.name != crate::config::mesh::MESH_CONFIGMAP => Kind::Secret,
            k => k,
        };
        self.kinds.insert(kind);
        if self.triggers.len() < 20 {
            self.triggers.push(format!("{:?} {}", ev.kind, ev.key));
        }
    }

    fn add_secret_trigger(&mut self, why: &str) {
        self.kinds.insert(Kind::Secret);
        self.triggers.push(why.into());
    }

    fn endpoints_only(&self) -> bool {
        self.kinds.iter().all(eds_update_kind)
    }

    /// Collects the changes that follow the first: until none came for the quiet period, at most
    /// the maximum delay. Endpoint-only batches (unless endpoints are debounced too) take only
    /// what is already queued. False when the loop is to stop.
    async fn debounce(
        &mut self,
        events: &mut tokio::sync::broadcast::Receiver<crate::store::Event>,
        debounce: Debounce,
        cancel: &CancellationToken,
        metrics: &XdsMetrics,
    ) -> bool {
        self.started = Instant::now();
        let mut quiet_until = self.started + debounce.quiet;
        let max_until = self.started + debounce.max;
        let mut debounced = debounce.endpoints || !self.endpoints_only();
        if !debounced {
            // Take what is already queued into this batch, without waiting for more.
            loop {
                match events.try_recv() {
                    Ok(ev) => self.add(&ev, metrics),
                    Err(TryRecvError::Lagged(_)) => self.lagged = true,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return false,
                }
            }
            debounced = self.lagged || !self.endpoints_only();
        }
        if debounced {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return false,
                    _ = tokio::time::sleep_until(quiet_until.min(max_until)) => break,
                    ev = events.recv() => {
                        match ev {
                            Ok(ev) => self.add(&ev, metrics),
                            Err(RecvError::Lagged(_)) => self.lagged = true,
                            Err(RecvError::Closed) => return false,
                        }
                        quiet_until = Instant::now() + debounce.quiet;
                    }
                }
            }
        }
        self.debounced_for = self.started.elapsed();
        metrics
            .push
            .debounce_time
            .observe(self.debounced_for.as_secs_f64());
        if self.lagged {
            self.triggers.push("event bus lagged: full resync".into());
        }
        true
    }
}

/// What the push loop carries from one round to the next: the last snapshot and registry (the
/// next round diffs from them), the routing indexes, the settings in force, the hostnames removed
/// lately, and the proxy views an endpoint-only push keeps.
struct Pipeline {
    store: Arc<Store>,
    sink: Arc<dyn PushSink>,
    metrics: Arc<XdsMetrics>,
    version: u64,
    snapshot: Arc<crate::store::Snapshot>,
    registry: Arc<Registry>,
    routing: Arc<crate::xds::context::Routing>,
    certificates: Certificates,
    /// The flags' settings, before MeshConfig.
    mesh: MeshSettings,
    /// The settings in force: what a mesh config that cannot be read leaves in place.
    in_force: MeshSettings,
    removed_hosts: Arc<crate::xds::context::RemovedHosts>,
    scopes: Option<crate::xds::context::ScopeCache>,
    judged: Option<crate::model::judged::JudgedSender>,
}

impl Pipeline {
    fn new(
        store: Arc<Store>,
        sink: Arc<dyn PushSink>,
        start: Start,
        metrics: Arc<XdsMetrics>,
    ) -> Pipeline {
        metrics
            .mesh
            .services
            .set(start.registry.services.len() as i64);
        metrics
            .push
            .judged_revision
            .set(start.snapshot.revision() as i64);
        let pipeline = Pipeline {
            store,
            sink,
            metrics,
            version: start.version,
            snapshot: start.snapshot,
            registry: start.registry,
            routing: start.routing,
            certificates: start.certificates,
            mesh: start.mesh,
            in_force: start.applied_mesh,
            removed_hosts: Arc::default(),
            scopes: None,
            judged: start.judged,
        };
        pipeline.publish_judged(&pipeline.registry, &pipeline.in_force);
        pipeline
    }

    /// Tells the status writers what this round judged: its snapshot, and the registry, settings
    /// and Gateway API translation built from it for proxies.
    fn publish_judged(&self, registry: &Arc<Registry>, mesh: &MeshSettings) {
        if let Some(tx) = &self.judged {
            tx.send_replace(Some(Arc::new(crate::model::judged::Judged {
                snapshot: self.snapshot.clone(),
                registry: registry.clone(),
                mesh: mesh.clone(),
                gateway_api: self.routing.gateway_api.clone(),
            })));
        }
    }

    /// One round: the store's snapshot now, the registry and routing updated from the last one,
    /// the batch judged, and when it changes what proxies are sent, a push context to the sink.
    fn round(&mut self, mut batch: Batch) {
        let previous = std::mem::replace(&mut self.snapshot, self.store.snapshot());
        let next_mesh = mesh_settings(
            &self.snapshot,
            &self.mesh,
            Some(&self.in_force),
            Some(&self.metrics),
        );
        self.in_force = next_mesh.clone();
        // Only the hostnames fed by objects that differ between the two snapshots are
        // recomputed: the cost follows the change, not the mesh.
        let (next, delta) = self.registry.update(
            &previous,
            &self.snapshot,
            &next_mesh.domain_suffix,
            &next_mesh.discovery_selectors,
            &next_mesh.cluster_networks,
        );
        let next = Arc::new(next);
        if delta.services_changed {
            self.note_removed_hosts(&next);
        }
        // Kept in step with `snapshot` in every round, pushed or not: the next round diffs
        // from this snapshot.
        self.routing = self
            .routing
            .reuse_or_build(&previous, &self.snapshot, &next_mesh);
        self.publish_judged(&next, &next_mesh);
        let Some(mut decision) = decide::decide(&batch.kinds, batch.lagged, delta, &next) else {
            debug!(
                kinds = ?batch.kinds,
                "change affects no service or endpoint; nothing to push"
            );
            self.registry = next;
            self.metrics
                .push
                .judged_revision
                .set(self.snapshot.revision() as i64);
            return;
        };
        // A Wasm module's registry credential is a Secret served over ECDS (istiod pushes
        // ECDS on Secret changes when a plugin names a pull secret).
        if decision.types.contains(&TypeUrl::Secret)
            && [Kind::WasmPlugin, Kind::TrafficExtension].iter().any(|k| {
                self.snapshot
                    .list(*k)
                    .any(|e| e.config.spec.names_pull_secret())
            })
        {
            decision.types.insert(TypeUrl::ExtensionConfig);
        }
        self.version += 1;
        self.record_judged(&decision, &next);
        info!(
            full = decision.full,
            eds_services = decision.eds_hosts.len(),
            kinds = ?batch.kinds,
            "pushing"
        );
        let context = self.context(&decision, next.clone(), next_mesh);
        let record = PushRecord {
            version: self.version,
            at_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
            full: decision.full,
            reason: decision.reason.into(),
            triggers: std::mem::take(&mut batch.triggers),
            eds_services: decision.eds_hosts.iter().cloned().collect(),
            proxies: 0,
            debounce_ms: batch.debounced_for.as_millis(),
        };
        let request = PushRequest {
            full: decision.full,
            types: decision.types,
            eds_hosts: Arc::new(decision.eds_hosts),
            started: batch.started.into_std(),
            reason: decision.reason.into(),
            queued: std::time::Instant::now(),
        };
        self.sink.push(context, request, record);
        self.registry = next;
    }

    /// Hostnames this change removed: proxies still subscribed to their clusters until they
    /// follow the push are behind, not making names up (the unknown-names bound).
    fn note_removed_hosts(&mut self, next: &Registry) {
        let gone: Vec<String> = self
            .registry
            .services
            .keys()
            .filter(|h| !next.services.contains_key(*h))
            .cloned()
            .collect();
        if !gone.is_empty() || !self.removed_hosts.is_empty() {
            self.removed_hosts = Arc::new(self.removed_hosts.with(gone));
        }
    }

    /// The gauges of a round that pushes: its trigger, the revision judged, what the registry
    /// and the store hold.
    fn record_judged(&self, decision: &decide::Decision, next: &Registry) {
        let metrics = &self.metrics;
        metrics
            .push
            .push_triggers
            .get_or_create(&TypeLabels {
                r#type: decision.reason.into(),
            })
            .inc();
        metrics
            .push
            .judged_revision
            .set(self.snapshot.revision() as i64);
        metrics.mesh.services.set(next.services.len() as i64);
        metrics
            .mesh
            .virtual_services
            .set(self.snapshot.count(Kind::VirtualService) as i64);
        metrics
            .mesh
            .no_instances
            .set(next.ports_without_endpoints() as i64);
        metrics
            .mesh
            .duplicate_clusters
            .set(next.duplicate_hosts as i64);
    }

    /// The push context of this round; an endpoint-only push shares the proxy views of the last.
    fn context(
        &mut self,
        decision: &decide::Decision,
        next: Arc<Registry>,
        mesh: MeshSettings,
    ) -> PushContext {
        let init = Instant::now();
        let context = PushContext::with_routing(
            self.version,
            self.snapshot.clone(),
            next,
            mesh,
            self.routing.clone(),
        )
        .with_certificates(self.certificates.clone())
        .with_removed_hosts(self.removed_hosts.clone());
        let context = match &self.scopes {
            Some(previous) if !decision.full => context.sharing_scopes(previous),
            _ => context,
        };
        self.scopes = Some(context.scope_cache());
        self.metrics
            .push
            .push_context_init
            .observe(init.elapsed().as_secs_f64());
        let conflicts = context.conflicts();
        self.metrics
            .mesh
            .duplicate_domains
            .set(conflicts.duplicate_domains as i64);
        self.metrics
            .mesh
            .duplicate_subsets
            .set(conflicts.duplicate_subsets as i64);
        context
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESH: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n    defaultServiceExportTo: [\".\"]\n";

    #[test]
    fn an_unreadable_mesh_config_keeps_the_settings_in_force() {
        let base = MeshSettings::default();
        let good = crate::testing::store(MESH).snapshot();
        let in_force = mesh_settings(&good, &base, None, None);
        assert!(!in_force.outbound_allow_any);
        // As the Kubernetes source stores it: a ConfigMap is not checked on the way in.
        use crate::source::kube::convert::IntoConfig;
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "istio", "namespace": "istio-system"},
            "data": {"mesh": "outboundTrafficPolicy: [not, a, policy]\n"}
        }))
        .expect("a ConfigMap");
        let store = crate::store::StoreWriter::default();
        store.upsert(cm.into_config());
        let broken = store.snapshot();
        let next = mesh_settings(&broken, &base, Some(&in_force), None);
        assert!(!next.outbound_allow_any, "REGISTRY_ONLY stays");
        assert_eq!(next.default_service_export_to, ["."]);
        assert!(
            mesh_settings(&broken, &base, None, None).outbound_allow_any,
            "at start, with nothing in force, the flags apply"
        );
    }
}

//! The leader's one status writer: analysis findings (istiod's status controller with
//! `PILOT_ENABLE_ANALYSIS`): after a quiet second following a change, and every analysis interval,
//! the findings of the current snapshot are compared with what each object's status holds, and
//! only the differences are written. A write is a JSON merge patch of the status subresource that
//! sets only `validationMessages` and `observedGeneration`, so fields other writers own are left
//! alone; writes are rate-limited. The store never sees status (the Kubernetes source drops it),
//! so a write does not cause a push.
//!
//! The same writer sets the conditions of every enabled producer (`super::producer::Producer`: ambient's
//! `istio.io/WaypointBound` and `ZtunnelAccepted` on Services, ServiceEntries, WorkloadEntries and
//! AuthorizationPolicies, as istiod's ambient status queue does). Conditions of other types on
//! those objects (other controllers') are kept; a write names the resourceVersion it read, so a
//! concurrent writer makes it retry instead of losing theirs.

use super::producer::{Condition, FieldsProducer, Input, Producer};
use crate::analysis::{Findings, analyze};
use crate::config::{ConfigKey, Kind};
use crate::metrics::{ReasonLabels, Registry};
use crate::model::judged::{Judged, JudgedReceiver};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The kinds analyzers report on (and whose statuses are read when leadership starts).
const ANALYZED: &[Kind] = &[Kind::VirtualService, Kind::Gateway];

/// Status writes by outcome (`rudder_status_writes_total{reason}`: written, conflict, error).
pub struct StatusMetrics {
    pub writes: Family<ReasonLabels, Counter>,
    /// Rounds finished (every object judged, differences written): what a test waits for to know
    /// that unchanged results were judged and not rewritten.
    pub rounds: Counter,
}

impl StatusMetrics {
    pub fn register(registry: &mut Registry) -> StatusMetrics {
        StatusMetrics {
            writes: registry.register(
                "rudder_status_writes",
                "Analysis results written into the status of Istio objects, by outcome",
                Family::default(),
            ),
            rounds: registry.register(
                "rudder_status_rounds",
                "Status rounds finished by the leader: every object judged, differences written",
                Counter::default(),
            ),
        }
    }

    fn count(&self, outcome: &str) {
        self.writes
            .get_or_create(&ReasonLabels {
                reason: outcome.into(),
            })
            .inc();
    }
}

pub struct StatusWriter {
    pub client: kube::Client,
    /// What the push loop judged, as it judges it: every round describes the latest.
    pub judged: JudgedReceiver,
    /// Time between full analyses (istiod's `PILOT_ANALYSIS_INTERVAL`).
    pub interval: Duration,
    pub writes_per_second: NonZeroU32,
    pub metrics: Arc<StatusMetrics>,
    /// Write analysis findings (`PILOT_ENABLE_ANALYSIS`).
    pub analysis: bool,
    /// The condition producers enabled (ambient's with `PILOT_ENABLE_AMBIENT` and
    /// `AMBIENT_ENABLE_STATUS`).
    pub producers: Vec<&'static dyn Producer>,
    /// The producers of whole status fields (the Gateway API's).
    pub field_producers: Vec<&'static dyn FieldsProducer>,
    /// Create istiod's GatewayClasses when leading (the waypoint class too with ambient, the
    /// east-west class with ambient multi-network), as istiod's GatewayClass controller.
    pub create_classes: Option<super::gateway_api::ClassSet>,
}

/// The conditions an object carries now, by type (only the types the producers own).
type ConditionsWritten = BTreeMap<ConfigKey, BTreeMap<String, Condition>>;

/// What an object's status says, as far as this writer owns it.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    messages: Vec<Value>,
    generation: Option<i64>,
}

fn api_resource(kind: Kind) -> ApiResource {
    let version = kind.served_versions().first().copied().unwrap_or("v1");
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(kind.group(), version, kind.name()),
        &kind.plural(),
    )
}

/// The API of `key`'s kind where `key` lives (cluster-scoped kinds have no namespace).
fn api_for(client: &kube::Client, key: &ConfigKey) -> Api<DynamicObject> {
    if key.kind.cluster_scoped() {
        Api::all_with(client.clone(), &api_resource(key.kind))
    } else {
        Api::namespaced_with(client.clone(), &key.namespace, &api_resource(key.kind))
    }
}

impl StatusWriter {
    /// Runs while this replica leads, until `cancel`.
    pub async fn run(self, mut leading: watch::Receiver<bool>, cancel: CancellationToken) {
        let limiter =
            governor::RateLimiter::direct(governor::Quota::per_second(self.writes_per_second));
        loop {
            if *leading.borrow_and_update() {
                info!(
                    analysis = self.analysis,
                    producers = ?self.producers.iter().map(|p| p.name()).collect::<Vec<_>>(),
                    "leading: writing analysis results and conditions into object status"
                );
                let mut written = if self.analysis {
                    self.read_current().await
                } else {
                    BTreeMap::new()
                };
                let mut conditions = if !self.producers.is_empty() {
                    self.read_current_conditions().await
                } else {
                    BTreeMap::new()
                };
                if let Some(set) = self.create_classes {
                    self.create_classes(set).await;
                }
                let mut fields_written: BTreeMap<ConfigKey, Value> = BTreeMap::new();
                let mut judged = self.judged.clone();
                let mut tick = tokio::time::interval(self.interval);
                loop {
                    // What the push loop judged last serves every writer of a round (none
                    // until its first round).
                    let view = judged.borrow_and_update().clone();
                    if let Some(view) = &view {
                        let round = Round {
                            judged: view,
                            limiter: &limiter,
                            leading: &leading,
                            cancel: &cancel,
                        };
                        self.write_round(
                            &mut written,
                            &mut conditions,
                            &mut fields_written,
                            &round,
                        )
                        .await;
                    }
                    // The next run: the interval, or a quiet second after a change.
                    let lost = tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tick.tick() => false,
                        _ = quiet_after_change(&mut judged) => false,
                        changed = leading.changed() => changed.is_err() || !*leading.borrow_and_update(),
                    };
                    if lost {
                        break;
                    }
                }
            } else {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    changed = leading.changed() => if changed.is_err() { return },
                }
            }
        }
    }

    /// One round: analysis findings, producers' conditions and fields, each written where they
    /// differ from what objects carry.
    async fn write_round(
        &self,
        written: &mut BTreeMap<ConfigKey, Written>,
        conditions: &mut ConditionsWritten,
        fields_written: &mut BTreeMap<ConfigKey, Value>,
        round: &Round<'_>,
    ) {
        if self.analysis {
            self.write_differences(written, round).await;
        }
        if !self.producers.is_empty() {
            self.write_conditions(conditions, round).await;
        }
        if !self.field_producers.is_empty() {
            self.write_fields(fields_written, round).await;
        }
        self.metrics.rounds.inc();
    }

    /// The statuses objects have now (written by an earlier leader, or by istiod), so that stale
    /// messages are cleared and nothing is rewritten unchanged.
    async fn read_current(&self) -> BTreeMap<ConfigKey, Written> {
        let mut out = BTreeMap::new();
        for &kind in ANALYZED {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(kind));
            let list = match api.list(&Default::default()).await {
                Ok(l) => l,
                Err(e) => {
                    warn!(kind = kind.name(), error = %e, "cannot read current statuses");
                    continue;
                }
            };
            for obj in list.items {
                let status = &obj.data["status"];
                let messages = status["validationMessages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if messages.is_empty() {
                    continue;
                }
                let key = ConfigKey {
                    kind,
                    namespace: obj.metadata.namespace.clone().unwrap_or_default(),
                    name: obj.metadata.name.clone().unwrap_or_default(),
                    cluster: String::new(),
                };
                let generation = status["observedGeneration"]
                    .as_str()
                    .and_then(|g| g.parse().ok())
                    .or_else(|| status["observedGeneration"].as_i64());
                out.insert(
                    key,
                    Written {
                        messages,
                        generation,
                    },
                );
            }
        }
        out
    }

    /// Analyzes the current snapshot and writes each object whose status differs.
    async fn write_differences(
        &self,
        written: &mut BTreeMap<ConfigKey, Written>,
        round: &Round<'_>,
    ) {
        let judged = round.judged;
        let snapshot = &*judged.snapshot;
        let findings: Findings = analyze(snapshot, &judged.registry, &judged.mesh.domain_suffix);
        for (key, messages) in &findings {
            for m in messages {
                debug!(object = %key, code = m.code, "configuration analysis: {}", m.text);
            }
        }
        // Objects with findings now, and objects whose old findings must be cleared.
        let mut wanted: BTreeMap<ConfigKey, Written> = BTreeMap::new();
        for key in findings.keys().chain(written.keys()) {
            let Some(entry) = snapshot.get(key) else {
                continue;
            };
            let messages = findings
                .get(key)
                .map(|m| m.iter().map(|m| m.to_status()).collect())
                .unwrap_or_default();
            wanted.insert(
                key.clone(),
                Written {
                    messages,
                    generation: entry.config.metadata.generation,
                },
            );
        }
        written.retain(|k, _| snapshot.get(k).is_some());
        for (key, want) in wanted {
            if written.get(&key) == Some(&want)
                || (want.messages.is_empty() && !written.contains_key(&key))
            {
                continue;
            }
            if !round.turn().await {
                return;
            }
            let result = self.patch(&key, &want).await;
            if self.outcome(&key, result).is_some() {
                if want.messages.is_empty() {
                    written.remove(&key);
                } else {
                    written.insert(key, want);
                }
            }
        }
    }

    /// The kinds the producers write on.
    fn condition_kinds(&self) -> Vec<Kind> {
        let mut kinds: Vec<Kind> = self
            .producers
            .iter()
            .flat_map(|p| p.kinds().iter().copied())
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// The condition types the producers own.
    fn owned_types(&self) -> Vec<&'static str> {
        self.producers
            .iter()
            .flat_map(|p| p.types().iter().copied())
            .collect()
    }

    /// The conditions objects carry now (from an earlier leader, or istiod).
    async fn read_current_conditions(&self) -> ConditionsWritten {
        let mut out = BTreeMap::new();
        let types = self.owned_types();
        for kind in self.condition_kinds() {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(kind));
            let list = match api.list(&Default::default()).await {
                Ok(l) => l,
                Err(e) => {
                    warn!(kind = kind.name(), error = %e, "cannot read current conditions");
                    continue;
                }
            };
            for obj in list.items {
                let ours = owned_conditions(
                    obj.data["status"]["conditions"]
                        .as_array()
                        .map_or(&[][..], Vec::as_slice),
                    &types,
                );
                if ours.is_empty() {
                    continue;
                }
                let key = ConfigKey {
                    kind,
                    namespace: obj.metadata.namespace.clone().unwrap_or_default(),
                    name: obj.metadata.name.clone().unwrap_or_default(),
                    cluster: String::new(),
                };
                out.insert(key, ours);
            }
        }
        out
    }

    /// Computes every producer's conditions for the current snapshot and writes each object
    /// whose conditions differ from what it carries.
    async fn write_conditions(&self, written: &mut ConditionsWritten, round: &Round<'_>) {
        let input = Input::of(round.judged);
        let snapshot = input.snapshot;
        let mut wanted = super::producer::Conditions::new();
        for producer in &self.producers {
            for (key, owned) in producer.conditions(&input) {
                wanted.entry(key).or_default().extend(owned);
            }
        }
        written.retain(|k, _| snapshot.get(k).is_some());
        for (key, owned) in wanted {
            let now = written.get(&key);
            let same = owned
                .iter()
                .all(|(t, want)| now.and_then(|n| n.get(*t)) == want.as_ref());
            if same {
                continue;
            }
            if !round.turn().await {
                return;
            }
            let result = self.patch_conditions(&key, &owned).await;
            if let Some(carried) = self.outcome(&key, result) {
                if carried.is_empty() {
                    written.remove(&key);
                } else {
                    written.insert(key, carried);
                }
            }
        }
    }

    /// Reads the object, replaces the condition types the producers own and keeps every other,
    /// and writes the list back at the resourceVersion read. Returns the producers' conditions as
    /// the object now carries them.
    async fn patch_conditions(
        &self,
        key: &ConfigKey,
        owned: &BTreeMap<&'static str, Option<Condition>>,
    ) -> Result<BTreeMap<String, Condition>, kube::Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &api_resource(key.kind));
        let Some(obj) = api.get_opt(&key.name).await? else {
            return Ok(BTreeMap::new());
        };
        let current: Vec<Value> = obj.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut next: Vec<Value> = current
            .iter()
            .filter(|c| c["type"].as_str().is_none_or(|t| !owned.contains_key(t)))
            .cloned()
            .collect();
        for (kind, want) in owned {
            let Some(want) = want else { continue };
            let status = if want.status { "True" } else { "False" };
            let previous = current.iter().find(|c| c["type"].as_str() == Some(kind));
            // The transition time moves only when the status does, as Kubernetes asks.
            let since = previous
                .filter(|p| p["status"].as_str() == Some(status))
                .and_then(|p| p["lastTransitionTime"].as_str())
                .map(str::to_string)
                .unwrap_or_else(now_rfc3339);
            let mut c = json!({"type": kind, "status": status, "reason": want.reason,
                               "message": want.message, "lastTransitionTime": since});
            if let Some(g) = want.observed_generation {
                // Istio's status types write int64 as a string (proto JSON).
                c["observedGeneration"] = g.to_string().into();
            }
            next.push(c);
        }
        let types = self.owned_types();
        let carried = owned_conditions(&next, &types);
        if carried == owned_conditions(&current, &types) && next.len() == current.len() {
            return Ok(carried);
        }
        let mut patch = json!({"status": {"conditions": next}});
        if let Some(rv) = &obj.metadata.resource_version {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
        api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(carried)
    }

    /// Creates istiod's GatewayClasses that do not exist (an existing one is left as it is).
    async fn create_classes(&self, set: super::gateway_api::ClassSet) {
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &api_resource(Kind::GatewayClass));
        for class in super::gateway_api::classes_to_create(set) {
            let name = class["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let Ok(obj) = serde_json::from_value::<DynamicObject>(class) else {
                continue;
            };
            match api.create(&kube::api::PostParams::default(), &obj).await {
                Ok(_) => info!(class = %name, "created GatewayClass"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                // No Gateway API CRDs: nothing to create.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    debug!(class = %name, "GatewayClass not created: the Gateway API is not installed");
                    return;
                }
                Err(e) => warn!(class = %name, error = %e, "cannot create GatewayClass"),
            }
        }
    }

    /// Computes every field producer's statuses and writes each object whose status (as far
    /// as the producers own it) differs from what was last written.
    async fn write_fields(&self, written: &mut BTreeMap<ConfigKey, Value>, round: &Round<'_>) {
        let input = Input::of(round.judged);
        let snapshot = input.snapshot;
        written.retain(|k, _| snapshot.get(k).is_some());
        for producer in &self.field_producers {
            for (key, wanted) in producer.statuses(&input) {
                if written.get(&key) == Some(&wanted) {
                    continue;
                }
                if !round.turn().await {
                    return;
                }
                let result = self.patch_fields(*producer, &key, &wanted).await;
                if self.outcome(&key, result).is_some() {
                    written.insert(key, wanted);
                }
            }
        }
    }

    /// Reads the object, merges the producer's fields into its status and writes it back at the
    /// resourceVersion read, unless nothing changes.
    async fn patch_fields(
        &self,
        producer: &dyn FieldsProducer,
        key: &ConfigKey,
        wanted: &Value,
    ) -> Result<(), kube::Error> {
        let api = api_for(&self.client, key);
        let Some(obj) = api.get_opt(&key.name).await? else {
            return Ok(());
        };
        let current = obj.data.get("status").cloned().unwrap_or(Value::Null);
        let next = producer.merge(key.kind, &current, wanted, &now_rfc3339());
        if next == current {
            return Ok(());
        }
        // A merge patch keeps what it does not name: a field the status loses is named null.
        let mut status = next;
        if let (Some(before), Some(after)) = (current.as_object(), status.as_object_mut()) {
            for k in before.keys() {
                after.entry(k.clone()).or_insert(Value::Null);
            }
        }
        let mut patch = json!({ "status": status });
        if let Some(rv) = &obj.metadata.resource_version {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
        api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    /// Counts (and logs) how a status write went; the written value when it did.
    fn outcome<T>(&self, key: &ConfigKey, result: Result<T, kube::Error>) -> Option<T> {
        match result {
            Ok(value) => {
                self.metrics.count("written");
                Some(value)
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                self.metrics.count("conflict");
                debug!(object = %key, error = %e, "status not written; the object changed");
                None
            }
            Err(e) => {
                self.metrics.count("error");
                warn!(object = %key, error = %e, "status not written; will retry");
                None
            }
        }
    }

    async fn patch(&self, key: &ConfigKey, want: &Written) -> Result<(), kube::Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &api_resource(key.kind));
        let mut status = json!({"validationMessages": want.messages});
        if let Some(g) = want.generation {
            status["observedGeneration"] = g.to_string().into();
        }
        api.patch_status(
            &key.name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map(|_| ())
    }
}

/// What one round of writes shares: the view the push loop judged, and what may stop it.
struct Round<'a> {
    judged: &'a Judged,
    limiter: &'a governor::DefaultDirectRateLimiter,
    leading: &'a watch::Receiver<bool>,
    cancel: &'a CancellationToken,
}

impl Round<'_> {
    /// Waits for the rate limit; false when the round must stop (shutdown, leadership lost).
    async fn turn(&self) -> bool {
        if self.cancel.is_cancelled() || !*self.leading.borrow() {
            return false;
        }
        self.limiter.until_ready().await;
        true
    }
}

/// The conditions of the `types` the producers own in a `status.conditions` list.
fn owned_conditions(list: &[Value], types: &[&str]) -> BTreeMap<String, Condition> {
    let mut out = BTreeMap::new();
    for c in list {
        let Some(kind) = c["type"].as_str() else {
            continue;
        };
        if !types.contains(&kind) {
            continue;
        }
        let generation = c["observedGeneration"]
            .as_str()
            .and_then(|g| g.parse().ok())
            .or_else(|| c["observedGeneration"].as_i64());
        out.insert(
            kind.to_string(),
            Condition {
                status: c["status"].as_str() == Some("True"),
                reason: c["reason"].as_str().unwrap_or_default().to_string(),
                message: c["message"].as_str().unwrap_or_default().to_string(),
                observed_generation: generation,
            },
        );
    }
    out
}

/// Now, as Kubernetes writes times (RFC 3339, whole seconds, UTC).
fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// Resolves once a newly judged view has been followed by a second without another.
async fn quiet_after_change(judged: &mut JudgedReceiver) {
    if judged.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(1), judged.changed()).await {
            Err(_) => return,
            Ok(Err(_)) => std::future::pending::<()>().await,
            Ok(Ok(())) => continue,
        }
    }
}

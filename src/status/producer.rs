//! What a status producer is: the conditions it sets on objects, the snapshot it reads, the
//! settings that enable it.

use crate::config::{ConfigKey, Kind};
use crate::model::Registry;
use crate::model::gateway_api::Translation;
use crate::model::judged::Judged;
use crate::model::mesh::MeshSettings;
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// One condition as istiod sets it (the writer adds the transition time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: bool,
    pub reason: String,
    pub message: String,
    /// Set on policies (the generation judged), not on services, as istiod.
    pub observed_generation: Option<i64>,
}

/// Per object: every condition type a producer owns on it, with the condition it should carry;
/// `None` means it should carry none (an earlier one is removed).
pub type Conditions = BTreeMap<ConfigKey, BTreeMap<&'static str, Option<Condition>>>;

/// What a producer reads: what the push loop last judged (`Judged`: a snapshot, and the
/// registry, mesh settings and Gateway API translation the push built from it), shared by a
/// round. Producers read nothing else, so a status says what proxies were given.
pub struct Input<'a> {
    pub snapshot: &'a Snapshot,
    pub registry: &'a Registry,
    pub mesh: &'a MeshSettings,
    pub translation: &'a Translation,
}

impl<'a> Input<'a> {
    pub fn of(judged: &'a Judged) -> Input<'a> {
        Input {
            snapshot: &judged.snapshot,
            registry: &judged.registry,
            mesh: &judged.mesh,
            translation: &judged.gateway_api,
        }
    }
}

/// A pure source of conditions.
pub trait Producer: Sync {
    /// Named in logs.
    fn name(&self) -> &'static str;
    /// The condition types it owns: the writer replaces these and keeps every other.
    fn types(&self) -> &'static [&'static str];
    /// The kinds it writes on (read at the start of leadership for what they carry).
    fn kinds(&self) -> &'static [Kind];
    /// Whether the daemon's settings ask for it.
    fn enabled(&self, settings: &Settings) -> bool;
    fn conditions(&self, input: &Input) -> Conditions;
}

/// A pure source of whole status fields, for kinds whose status is more than conditions (the
/// Gateway API's listeners, route parents and addresses).
pub trait FieldsProducer: Sync {
    /// Named in logs.
    fn name(&self) -> &'static str;
    /// The kinds it writes on.
    fn kinds(&self) -> &'static [Kind];
    /// Whether the daemon's settings ask for it.
    fn enabled(&self, settings: &Settings) -> bool;
    /// Per object, the status it should carry as far as this producer owns it (conditions
    /// without transition times).
    fn statuses(&self, input: &Input) -> BTreeMap<ConfigKey, serde_json::Value>;
    /// `current` status with what the producer owns replaced by `wanted` (transition times kept
    /// while a condition's status holds, `now` otherwise), other writers' fields kept.
    fn merge(
        &self,
        kind: Kind,
        current: &serde_json::Value,
        wanted: &serde_json::Value,
        now: &str,
    ) -> serde_json::Value;
}

/// The daemon settings producers are enabled by.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// `PILOT_ENABLE_AMBIENT` and `AMBIENT_ENABLE_STATUS`.
    pub ambient_status: bool,
    /// `PILOT_ENABLE_GATEWAY_API_STATUS`.
    pub gateway_api_status: bool,
    /// The Kubernetes Ingresses' addresses (istiod's ingress status, always on in Kubernetes
    /// mode).
    pub ingress_status: bool,
    /// `PILOT_ENABLE_IP_AUTOALLOCATE`: ServiceEntry addresses allocated by the leader.
    pub ip_autoallocate: bool,
}

//! What Rudder writes into the status of Kubernetes objects, as istiod's status controllers do.
//! Producers are pure functions over a snapshot ([`Producer`]: ambient's conditions today, Gateway
//! API conditions next); one leader-only writer (`writer`) applies them, and analysis findings,
//! as merge patches of the status subresource, keeps other writers' conditions, and is
//! rate-limited and counted. A new kind of condition is a producer in a file of its own, listed
//! in [`PRODUCERS`]; the writer does not change.

pub mod ambient;
pub mod gateway_api;
pub mod ingress;
pub mod ip_allocate;
pub mod writer;

use crate::config::{ConfigKey, Kind};
use crate::model::Registry;
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

/// What a producer reads: one snapshot and the registry built from it, shared by a round.
pub struct Input<'a> {
    pub snapshot: &'a Snapshot,
    pub registry: &'a Registry,
    pub domain_suffix: &'a str,
    pub root_namespace: &'a str,
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

/// Every producer.
pub static PRODUCERS: &[&dyn Producer] = &[&ambient::Ambient];

/// Every producer of whole status fields.
pub static FIELD_PRODUCERS: &[&dyn FieldsProducer] = &[
    &gateway_api::GatewayApi,
    &ingress::IngressStatus,
    &ip_allocate::IpAllocator,
];

/// The field producers `settings` enable.
pub fn enabled_fields(settings: &Settings) -> Vec<&'static dyn FieldsProducer> {
    FIELD_PRODUCERS
        .iter()
        .copied()
        .filter(|p| p.enabled(settings))
        .collect()
}

/// The producers `settings` enable.
pub fn enabled(settings: &Settings) -> Vec<&'static dyn Producer> {
    PRODUCERS
        .iter()
        .copied()
        .filter(|p| p.enabled(settings))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producers_follow_their_settings_and_never_share_a_condition_type() {
        assert!(enabled(&Settings::default()).is_empty());
        let on = enabled(&Settings {
            ambient_status: true,
            ..Settings::default()
        });
        assert_eq!(on.iter().map(|p| p.name()).collect::<Vec<_>>(), ["ambient"]);
        let mut types: Vec<&str> = PRODUCERS.iter().flat_map(|p| p.types().to_vec()).collect();
        let all = types.len();
        types.sort();
        types.dedup();
        assert_eq!(types.len(), all, "two producers own one condition type");
    }
}

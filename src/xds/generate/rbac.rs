//! Envoy RBAC config shared by AuthorizationPolicy (ALLOW, DENY, AUDIT) and CUSTOM's shadow rules,
//! encoded so the same policies always give the same bytes.

use envoy_types::pb::envoy::config::rbac::v3::{Policy, rbac};
use std::collections::BTreeMap;

pub const RBAC_FILTER: &str = "envoy.filters.http.rbac";
pub const NETWORK_RBAC_FILTER: &str = "envoy.filters.network.rbac";

/// A config `Rbac` with its policies encoded in name order: Envoy's policy map would otherwise be
/// written in hash order, and the same config would produce different bytes (and needless pushes).
pub fn rbac_bytes(action: rbac::Action, policies: &BTreeMap<String, Policy>) -> Vec<u8> {
    use prost::Message;
    let mut rules = envoy_types::pb::envoy::config::rbac::v3::Rbac {
        action: action as i32,
        ..Default::default()
    }
    .encode_to_vec();
    super::util::encode_sorted_map(2, policies, &mut rules);
    rules
}

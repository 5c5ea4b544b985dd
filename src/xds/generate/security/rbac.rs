//! Envoy RBAC config shared by AuthorizationPolicy (ALLOW, DENY, AUDIT) and CUSTOM's shadow rules,
//! encoded so the same policies always give the same bytes.

use crate::xds::generate::typed_listener::NetworkFilter;
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::rbac::v3::{Policy, Principal, principal, rbac};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::google::protobuf::Any;
use std::collections::BTreeMap;

pub const RBAC_FILTER: &str = "envoy.filters.http.rbac";
pub const NETWORK_RBAC_FILTER: &str = "envoy.filters.network.rbac";

/// The HTTP RBAC filter of an encoded HTTP `Rbac` config.
pub fn http_rbac_filter(value: Vec<u8>) -> HttpFilter {
    HttpFilter {
        name: RBAC_FILTER.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(Any {
            type_url: <HttpRbac as prost::Name>::type_url(),
            value,
        })),
        ..Default::default()
    }
}

/// The network RBAC filter of an encoded network `Rbac` config.
pub fn network_rbac_filter(value: Vec<u8>) -> NetworkFilter {
    let type_url = <NetworkRbac as prost::Name>::type_url();
    NetworkFilter::encoded(
        NETWORK_RBAC_FILTER,
        filter::ConfigType::TypedConfig(Any { type_url, value }),
    )
}

/// A config `Rbac` with its policies encoded in name order: Envoy's policy map would otherwise be
/// written in hash order, and the same config would produce different bytes (and needless pushes).
pub fn rbac_bytes(action: rbac::Action, policies: &BTreeMap<String, Policy>) -> Vec<u8> {
    use prost::Message;
    let mut rules = envoy_types::pb::envoy::config::rbac::v3::Rbac {
        action: action as i32,
        ..Default::default()
    }
    .encode_to_vec();
    crate::xds::generate::encode::encode_sorted_map(2, policies, &mut rules);
    rules
}

/// The filter-state key a waypoint keeps the HBONE peer's identity under (set when the tunnel
/// is terminated, shared with the internal listener behind it), as istiod's waypoints read it.
pub const PEER_PRINCIPAL_KEY: &str = "io.istio.peer_principal";

/// `p` with every match on the connection's peer certificate made a match on the tunnel peer's
/// identity in filter state (istiod's waypoint form).
pub fn from_tunnel_peer(p: Principal) -> Principal {
    use envoy_types::pb::envoy::r#type::matcher::v3::{FilterStateMatcher, filter_state_matcher};
    let identifier = match p.identifier {
        Some(principal::Identifier::Authenticated(a)) => {
            principal::Identifier::FilterState(FilterStateMatcher {
                key: PEER_PRINCIPAL_KEY.into(),
                matcher: a
                    .principal_name
                    .map(filter_state_matcher::Matcher::StringMatch),
            })
        }
        Some(principal::Identifier::AndIds(set)) => principal::Identifier::AndIds(principal::Set {
            ids: set.ids.into_iter().map(from_tunnel_peer).collect(),
        }),
        Some(principal::Identifier::OrIds(set)) => principal::Identifier::OrIds(principal::Set {
            ids: set.ids.into_iter().map(from_tunnel_peer).collect(),
        }),
        Some(principal::Identifier::NotId(inner)) => {
            principal::Identifier::NotId(Box::new(from_tunnel_peer(*inner)))
        }
        other => return Principal { identifier: other },
    };
    Principal {
        identifier: Some(identifier),
    }
}

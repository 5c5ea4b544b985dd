//! Small builders shared by the generators.

use crate::config::common::StringMatch;
use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiVersion, ConfigSource, config_source::ConfigSourceSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};
use envoy_types::pb::google::protobuf::Duration;

pub fn duration(d: std::time::Duration) -> Duration {
    Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// Config delivered over the same ADS stream.
pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

/// Istio `Percent` (0..100, fractional) as Envoy's per-million fraction.
pub fn fraction(percent: f64) -> FractionalPercent {
    FractionalPercent {
        numerator: (percent.clamp(0.0, 100.0) * 10_000.0).round() as u32,
        denominator: DenominatorType::Million as i32,
    }
}

/// `None` for `{}` (no match type): its users decide what matching anything means there.
pub fn string_matcher(m: &StringMatch, ignore_case: bool) -> Option<StringMatcher> {
    let pattern = match m {
        StringMatch::Any => return None,
        StringMatch::Exact(s) => MatchPattern::Exact(s.clone()),
        StringMatch::Prefix(s) => MatchPattern::Prefix(s.clone()),
        StringMatch::Regex(r) => MatchPattern::SafeRegex(RegexMatcher {
            regex: r.clone(),
            ..Default::default()
        }),
    };
    Some(StringMatcher {
        match_pattern: Some(pattern),
        ignore_case,
    })
}

/// `outbound|port|subset|host`, Istio's cluster naming.
pub fn outbound_cluster(port: u32, subset: &str, host: &str) -> String {
    format!("outbound|{port}|{subset}|{host}")
}

/// A waypoint's cluster of a service it serves: `inbound-vip|port|protocol[/subset]|host`.
pub fn inbound_vip_cluster(port: u32, subset: &str, host: &str) -> String {
    format!("{INBOUND_VIP}|{port}|{subset}|{host}")
}

pub const INBOUND_VIP: &str = "inbound-vip";

/// Splits the name of a cluster of one service port — an outbound cluster, or a waypoint's
/// `inbound-vip` one — into (port, subset, host).
pub fn parse_service_cluster(name: &str) -> Option<(u32, &str, &str)> {
    let mut parts = name.splitn(4, '|');
    if !matches!(parts.next()?, "outbound" | INBOUND_VIP) {
        return None;
    }
    let port = parts.next()?.parse().ok()?;
    let subset = parts.next()?;
    let host = parts.next()?;
    Some((port, subset, host))
}

/// istiod's `BuildDNSSrvSubsetKey` for outbound traffic: the SNI and the cluster name.
pub fn sni_dnat_name(port: u32, subset: &str, host: &str) -> String {
    format!("outbound_.{port}_.{subset}_.{host}")
}

/// (port, subset, host) of an SNI-DNAT name.
pub fn parse_sni_dnat(name: &str) -> Option<(u32, &str, &str)> {
    let rest = name.strip_prefix("outbound_.")?;
    let (port, rest) = rest.split_once("_.")?;
    let (subset, host) = rest.split_once("_.")?;
    Some((port.parse().ok()?, subset, host))
}

/// Whether a VirtualService match (HTTP or L4) applies to this sidecar on `port`: its port, source
/// labels and namespace, and the `mesh` gateway (decided at generation time for the proxy).
pub fn match_applies_to_sidecar(
    scope: &crate::xds::context::ScopeView,
    port: u32,
    match_port: u32,
    labels: &std::collections::BTreeMap<String, String>,
    gateways: &[String],
    source_namespace: &str,
) -> bool {
    (match_port == 0 || match_port == port)
        && crate::config::mesh::labels_match(labels, &scope.labels)
        && (source_namespace.is_empty() || source_namespace == scope.namespace)
        && (gateways.is_empty() || gateways.iter().any(|g| g == "mesh"))
}

/// The port a listener binds, when it binds a socket address.
pub fn listener_port(l: &envoy_types::pb::envoy::config::listener::v3::Listener) -> Option<u32> {
    use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
    match l.address.as_ref()?.address.as_ref()? {
        address::Address::SocketAddress(s) => match s.port_specifier {
            Some(socket_address::PortSpecifier::PortValue(p)) => Some(p),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_round_trip() {
        let name = outbound_cluster(9080, "v1", "reviews.ns.svc.cluster.local");
        assert_eq!(name, "outbound|9080|v1|reviews.ns.svc.cluster.local");
        assert_eq!(
            parse_service_cluster(&name),
            Some((9080, "v1", "reviews.ns.svc.cluster.local"))
        );
        assert_eq!(parse_service_cluster("inbound|80||"), None);
        assert_eq!(parse_service_cluster("outbound|x||h"), None);
    }

    #[test]
    fn sni_dnat_names_round_trip() {
        let name = sni_dnat_name(9080, "v1", "reviews.default.svc.cluster.local");
        assert_eq!(
            name,
            "outbound_.9080_.v1_.reviews.default.svc.cluster.local"
        );
        assert_eq!(
            parse_sni_dnat(&name),
            Some((9080, "v1", "reviews.default.svc.cluster.local"))
        );
        assert_eq!(parse_sni_dnat("outbound|80||a"), None);
    }

    #[test]
    fn percent_is_per_million() {
        assert_eq!(fraction(12.5).numerator, 125_000);
        assert_eq!(fraction(100.0).numerator, 1_000_000);
    }
}

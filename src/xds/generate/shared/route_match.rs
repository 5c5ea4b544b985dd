//! The match of an Envoy route from a VirtualService's HTTP match: path (whole segments for the
//! Gateway API and Ingress), headers and their absence, JWT claims on the verified payload,
//! pseudo-headers, query parameters.

use super::util::string_matcher;
use crate::config::common::StringMatch;
use crate::config::networking::HttpMatchRequest;
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher, query_parameter_matcher,
    route_match,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use envoy_types::pb::google::protobuf::BoolValue;

/// istiod's canBeConvertedToPresentMatch: `{}`, or a regex of `*` (not RE2: "anything").
fn is_present_match(sm: &StringMatch) -> bool {
    matches!(sm, StringMatch::Any) || matches!(sm, StringMatch::Regex(r) if r == "*")
}

/// The Envoy match of an HTTP match; `segments`: prefixes match whole path segments.
pub(in crate::xds::generate) fn route_match(
    m: Option<&HttpMatchRequest>,
    segments: bool,
) -> RouteMatch {
    let mut rm = RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
        ..Default::default()
    };
    let Some(m) = m else { return rm };
    if let Some(uri) = &m.uri {
        rm.path_specifier = Some(match uri {
            StringMatch::Exact(p) => route_match::PathSpecifier::Path(p.clone()),
            StringMatch::Prefix(p) if segments && p != "/" => {
                route_match::PathSpecifier::PathSeparatedPrefix(p.trim_end_matches('/').into())
            }
            StringMatch::Prefix(p) => route_match::PathSpecifier::Prefix(p.clone()),
            StringMatch::Regex(r) => route_match::PathSpecifier::SafeRegex(RegexMatcher {
                regex: r.clone(),
                ..Default::default()
            }),
            StringMatch::Any => route_match::PathSpecifier::Prefix("/".into()),
        });
    }
    if m.ignore_uri_case {
        rm.case_sensitive = Some(BoolValue { value: false });
    }
    // istiod's translateHeaderMatch: a regex of `*` asks only that the header be present.
    let header = |name: &str, sm: &StringMatch, invert: bool| HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(if is_present_match(sm) {
            header_matcher::HeaderMatchSpecifier::PresentMatch(true)
        } else {
            header_matcher::HeaderMatchSpecifier::StringMatch(
                string_matcher(sm, false).unwrap_or_default(),
            )
        }),
        invert_match: invert,
        // Without the header, an inverted value match must still hold (istiod).
        treat_missing_header_as_empty: invert && !is_present_match(sm),
    };
    // A JWT claim is matched on the payload the jwt_authn filter verified, not as a header (as
    // istiod); headers are ordered by name, then the pseudo-headers.
    let mut named = Vec::new();
    for (name, sm, invert) in m
        .headers
        .iter()
        .map(|(n, sm)| (n, sm, false))
        .chain(m.without_headers.iter().map(|(n, sm)| (n, sm, true)))
    {
        match crate::config::networking::routing_claim(name) {
            Some(claims) => {
                // A claim matched by `{}`: present with any value.
                let mut matcher =
                    super::jwt_payload::claim_matcher(&claims, string_matcher(sm, false));
                matcher.invert = invert;
                rm.dynamic_metadata.push(matcher);
            }
            None => named.push(header(name, sm, invert)),
        }
    }
    named.sort_by(|a, b| a.name.cmp(&b.name));
    rm.headers.extend(named);
    for (pseudo, sm) in [
        (":method", &m.method),
        (":authority", &m.authority),
        (":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            rm.headers.push(header(pseudo, sm, false));
        }
    }
    for (name, sm) in &m.query_params {
        rm.query_parameters.push(QueryParameterMatcher {
            name: name.clone(),
            // `{}`: the parameter is present.
            query_parameter_match_specifier: Some(match string_matcher(sm, false) {
                Some(m) => query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(m),
                None => query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true),
            }),
        });
    }
    rm
}

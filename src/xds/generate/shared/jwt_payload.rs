//! Where the jwt_authn filter leaves a verified token's payload (its dynamic metadata), and the
//! matchers that read it there: shared by AuthorizationPolicy principals (`security::jwt`) and by
//! routes that match a VirtualService's `@request.auth.claims.…` header.

use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, OrMatcher, StringMatcher, ValueMatcher, list_matcher,
    metadata_matcher, value_matcher,
};

pub const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";
/// Where every provider writes the verified payload (the filter's dynamic metadata key).
pub const PAYLOAD_KEY: &str = "payload";

/// The claim at `claims` in the verified payload is `value` or, for a list claim, holds an
/// element that is: what a principal matches, and what a route matches for a VirtualService's
/// `@request.auth.claims.…` header (istiod's `MetadataMatcherForJWTClaims`).
/// `None` for `value`: the claim is present, whatever its value.
pub fn claim_matcher(claims: &[&str], value: Option<StringMatcher>) -> MetadataMatcher {
    let Some(value) = value else {
        return payload_matcher(claims, value_matcher::MatchPattern::PresentMatch(true));
    };
    let one = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::StringMatch(value)),
    };
    let list = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
            ListMatcher {
                match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(one.clone()))),
            },
        ))),
    };
    payload_matcher(
        claims,
        value_matcher::MatchPattern::OrMatch(OrMatcher {
            value_matchers: vec![list, one],
        }),
    )
}

pub fn payload_matcher(fields: &[&str], value: value_matcher::MatchPattern) -> MetadataMatcher {
    MetadataMatcher {
        filter: JWT_FILTER.into(),
        path: std::iter::once(PAYLOAD_KEY)
            .chain(fields.iter().copied())
            .map(|k| metadata_matcher::PathSegment {
                segment: Some(metadata_matcher::path_segment::Segment::Key(k.to_string())),
            })
            .collect(),
        value: Some(ValueMatcher {
            match_pattern: Some(value),
        }),
        invert: false,
    }
}

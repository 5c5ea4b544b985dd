//! RequestAuthentication → Envoy's jwt_authn filter. As in Istio, a request with an invalid token is
//! rejected (401) and one without a token passes; AuthorizationPolicy decides the rest through
//! `requestPrincipals` (`iss/sub`), matched against the payload the filter verified.

use super::util::encode_sorted_map;
use crate::config::security::{JwtRule, RequestAuthentication};
use crate::config::{Kind, Spec};
use crate::xds::context::PushContext;
use crate::xds::proxy::Proxy;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::rbac::v3::{Principal, SourcedMetadata, principal};
use envoy_types::pb::envoy::config::route::v3::{RouteMatch, route_match};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtAuthentication, JwtHeader, JwtProvider, JwtRequirement, JwtRequirementOrList,
    RequirementRule, jwt_provider, jwt_requirement, requirement_rule,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    MetadataMatcher, StringMatcher, ValueMatcher, metadata_matcher, string_matcher, value_matcher,
};
use envoy_types::pb::google::protobuf::{Any, Empty};
use std::collections::BTreeMap;
use tracing::debug;

pub const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";
/// Where every provider writes the verified payload (the filter's dynamic metadata key).
const PAYLOAD_KEY: &str = "payload";

fn provider(rule: &JwtRule) -> Option<JwtProvider> {
    if rule.jwks.is_empty() {
        // istiod fetches `jwksUri` itself and inlines the keys; Rudder does not fetch yet.
        debug!(issuer = %rule.issuer, "jwt rule without inline jwks is not enforced");
        return None;
    }
    Some(JwtProvider {
        issuer: rule.issuer.clone(),
        audiences: rule.audiences.clone(),
        forward: rule.forward_original_token,
        from_headers: rule
            .from_headers
            .iter()
            .map(|h| JwtHeader {
                name: h.name.clone(),
                value_prefix: h.prefix.clone(),
            })
            .collect(),
        from_params: rule.from_params.clone(),
        from_cookies: rule.from_cookies.clone(),
        payload_in_metadata: PAYLOAD_KEY.into(),
        jwks_source_specifier: Some(jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(rule.jwks.clone())),
            ..Default::default()
        })),
        ..Default::default()
    })
}

/// The jwt_authn filter for the RequestAuthentications that select `proxy` (none: no filter).
pub fn http_filter(ctx: &PushContext, proxy: &Proxy) -> Option<HttpFilter> {
    let root = ctx.mesh.root_namespace.as_str();
    let mut providers: BTreeMap<String, JwtProvider> = BTreeMap::new();
    for ns in [proxy.namespace.as_str(), root] {
        for e in ctx.snapshot.list_namespace(Kind::RequestAuthentication, ns) {
            let Spec::RequestAuthentication(ra) = &e.config.spec else {
                continue;
            };
            let ra: &RequestAuthentication = ra;
            if ra.target_ref.is_some() || !ra.target_refs.is_empty() {
                continue;
            }
            let selected = ra.selector.as_ref().is_none_or(|s| {
                s.match_labels
                    .iter()
                    .all(|(k, v)| proxy.labels.get(k) == Some(v))
            });
            if !selected {
                continue;
            }
            for (i, rule) in ra.jwt_rules.iter().enumerate() {
                if let Some(p) = provider(rule) {
                    providers.insert(format!("origins-{ns}-{}-{i}", e.config.metadata.name), p);
                }
            }
        }
        if ns == root {
            break;
        }
    }
    if providers.is_empty() {
        return None;
    }
    let mut any_of: Vec<JwtRequirement> = providers
        .keys()
        .map(|name| JwtRequirement {
            requires_type: Some(jwt_requirement::RequiresType::ProviderName(name.clone())),
        })
        .collect();
    any_of.push(JwtRequirement {
        requires_type: Some(jwt_requirement::RequiresType::AllowMissing(Empty {})),
    });
    let config = JwtAuthentication {
        rules: vec![RequirementRule {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            requirement_type: Some(requirement_rule::RequirementType::Requires(
                JwtRequirement {
                    requires_type: Some(jwt_requirement::RequiresType::RequiresAny(
                        JwtRequirementOrList {
                            requirements: any_of,
                        },
                    )),
                },
            )),
        }],
        ..Default::default()
    };
    let mut value = prost::Message::encode_to_vec(&config);
    encode_sorted_map(1, &providers, &mut value);
    Some(HttpFilter {
        name: JWT_FILTER.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(Any {
            type_url: <JwtAuthentication as prost::Name>::type_url(),
            value,
        })),
        ..Default::default()
    })
}

fn payload(field: &str, value: value_matcher::MatchPattern) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::SourcedMetadata(SourcedMetadata {
            metadata_source: 0,
            metadata_matcher: Some(MetadataMatcher {
                filter: JWT_FILTER.into(),
                path: [PAYLOAD_KEY, field]
                    .iter()
                    .map(|k| metadata_matcher::PathSegment {
                        segment: Some(metadata_matcher::path_segment::Segment::Key(k.to_string())),
                    })
                    .collect(),
                value: Some(ValueMatcher {
                    match_pattern: Some(value),
                }),
                invert: false,
            }),
        })),
    }
}

fn string(pattern: string_matcher::MatchPattern) -> value_matcher::MatchPattern {
    value_matcher::MatchPattern::StringMatch(StringMatcher {
        match_pattern: Some(pattern),
        ignore_case: false,
    })
}

/// A `requestPrincipals` value (`iss/sub`; `*` any verified token; `iss/*` any subject of an
/// issuer) as a match on the verified payload.
pub fn request_principal(value: &str) -> Option<Principal> {
    if value == "*" {
        return Some(payload(
            "iss",
            value_matcher::MatchPattern::PresentMatch(true),
        ));
    }
    let (iss, sub) = value.rsplit_once('/')?;
    let issuer = payload(
        "iss",
        string(string_matcher::MatchPattern::Exact(iss.into())),
    );
    let subject = if sub == "*" {
        payload("sub", value_matcher::MatchPattern::PresentMatch(true))
    } else {
        payload(
            "sub",
            string(string_matcher::MatchPattern::Exact(sub.into())),
        )
    };
    Some(Principal {
        identifier: Some(principal::Identifier::AndIds(principal::Set {
            ids: vec![issuer, subject],
        })),
    })
}

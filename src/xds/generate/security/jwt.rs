//! RequestAuthentication → Envoy's jwt_authn filter. As in Istio, a request with an invalid token is
//! rejected (401) and one without a token passes; AuthorizationPolicy decides the rest through
//! `requestPrincipals` (`iss/sub`), matched against the payload the filter verified.

use crate::config::security::JwtRule;
use crate::config::{Kind, Spec};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::encode_sorted_map;
use crate::xds::proxy::ProxyType;
use envoy_types::pb::envoy::config::core::v3::{DataSource, HttpUri, data_source, http_uri};
use envoy_types::pb::envoy::config::rbac::v3::{Principal, SourcedMetadata, principal};
use envoy_types::pb::envoy::config::route::v3::{RouteMatch, route_match};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwksAsyncFetch, JwtAuthentication, JwtClaimToHeader, JwtHeader, JwtProvider, JwtRequirement,
    JwtRequirementOrList, RemoteJwks, RequirementRule, jwt_provider, jwt_requirement,
    requirement_rule,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher, value_matcher};
use envoy_types::pb::google::protobuf::{Any, Empty};
use std::collections::BTreeMap;
use tracing::debug;

pub use crate::xds::generate::shared::jwt_payload::JWT_FILTER;
use crate::xds::generate::shared::jwt_payload::{PAYLOAD_KEY, claim_matcher, payload_matcher};

/// Where a `jwksUri` is fetched from: scheme, host, port, and the cluster Envoy uses (the service's
/// own outbound cluster when the host is in the registry, else a dedicated one).
struct JwksSource {
    https: bool,
    host: String,
    port: u16,
    cluster: String,
}

fn jwks_source(ctx: &PushContext, uri: &str) -> Option<JwksSource> {
    let url = url::Url::parse(uri).ok()?;
    let https = match url.scheme() {
        "https" => true,
        "http" => false,
        _ => return None,
    };
    let host = url.host_str()?.trim_matches(['[', ']']).to_string();
    let port = url.port_or_known_default()?;
    let cluster = if ctx
        .registry
        .services
        .get(&host)
        .is_some_and(|s| s.port(u32::from(port)).is_some())
    {
        crate::xds::generate::shared::util::outbound_cluster(u32::from(port), "", &host)
    } else {
        format!("jwks|{host}|{port}")
    };
    Some(JwksSource {
        https,
        host,
        port,
        cluster,
    })
}

/// A JWKS whose only key (a P-256 public key whose private half was discarded when it was made)
/// verifies no token: the keys of an issuer Rudder cannot resolve.
const UNUSABLE_JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","alg":"ES256","kid":"rudder-unresolved","use":"sig","x":"ipWT9p_3uyHqdBfSguqfbo2RVj7ejMiphHkHJ3s2tDU","y":"3gT7ar4hmg51MVhsr1UqCfmyp2GzpqWrn0sJdO5iR-I"}]}"#;

/// Where Envoy finds the keys: inline `jwks`, else fetched from `jwksUri` by Envoy itself (istiod's
/// PILOT_JWT_ENABLE_REMOTE_JWKS mode: the control plane never opens a connection a config author
/// chose).
fn keys(ctx: &PushContext, rule: &JwtRule) -> Option<jwt_provider::JwksSourceSpecifier> {
    if !rule.jwks.is_empty() {
        return Some(jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(rule.jwks.clone())),
            ..Default::default()
        }));
    }
    let Some(source) = jwks_source(ctx, &rule.jwks_uri) else {
        // No keys Rudder can point Envoy at (no OIDC discovery of an issuer's `jwksUri`): the
        // issuer's tokens are refused, as istiod refuses them when it cannot fetch keys, rather
        // than the rule being dropped and every token let through. Warned at admission
        // (`validation::unhonoured`).
        debug!(issuer = %rule.issuer, uri = %rule.jwks_uri, "jwt rule without usable jwks or jwksUri: its tokens are refused");
        return Some(jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(UNUSABLE_JWKS.into())),
            ..Default::default()
        }));
    };
    Some(jwt_provider::JwksSourceSpecifier::RemoteJwks(RemoteJwks {
        http_uri: Some(HttpUri {
            uri: rule.jwks_uri.clone(),
            timeout: Some(crate::xds::generate::shared::util::duration(
                rule.timeout
                    .map_or(std::time::Duration::from_secs(5), |t| t.as_std()),
            )),
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(source.cluster)),
        }),
        cache_duration: Some(crate::xds::generate::shared::util::duration(
            std::time::Duration::from_secs(1200),
        )),
        async_fetch: Some(JwksAsyncFetch::default()),
        ..Default::default()
    }))
}

/// Clusters for `jwksUri` hosts that are not services of the mesh (DNS, TLS with the system CAs for
/// https), for the RequestAuthentications that select `proxy` (at a waypoint, also those
/// targeting each service of `served`).
pub fn jwks_clusters(
    ctx: &PushContext,
    scope: &ScopeView,
    served: &[&crate::model::Service],
) -> Vec<crate::xds::generate::finish::Typed> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        ClusterDiscoveryType, DiscoveryType,
    };
    use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
    };
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CertificateValidationContext, CommonTlsContext, UpstreamTlsContext,
        common_tls_context::ValidationContextType,
    };
    let mut seen = std::collections::BTreeMap::new();
    let rules = std::iter::once(None)
        .chain(served.iter().map(|s| Some(*s)))
        .flat_map(|svc| selected_rules(ctx, scope, svc));
    for (_, rule) in rules {
        if !rule.jwks.is_empty() {
            continue;
        }
        if let Some(src) =
            jwks_source(ctx, &rule.jwks_uri).filter(|s| s.cluster.starts_with("jwks|"))
        {
            seen.insert(src.cluster.clone(), src);
        }
    }
    seen.into_values()
        .map(|src| {
            let literal = src.host.parse::<std::net::IpAddr>().is_ok();
            let kind = if literal {
                DiscoveryType::Static
            } else {
                DiscoveryType::StrictDns
            };
            let tls = src.https.then(|| TransportSocket {
                name: "envoy.transport_sockets.tls".into(),
                config_type: Some(transport_socket::ConfigType::TypedConfig(crate::xds::generate::encode::any(
                    &UpstreamTlsContext {
                        sni: src.host.clone(),
                        common_tls_context: Some(CommonTlsContext {
                            validation_context_type: Some(
                                ValidationContextType::ValidationContext(
                                    CertificateValidationContext {
                                        trusted_ca: Some(DataSource {
                                            specifier: Some(data_source::Specifier::Filename(
                                                crate::xds::generate::shared::upstream_tls::SYSTEM_ROOTS.into(),
                                            )),
                                            ..Default::default()
                                        }),
                                        ..Default::default()
                                    },
                                ),
                            ),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ))),
            });
            crate::xds::generate::finish::Typed::new(
                &src.cluster,
                crate::xds::generate::finish::Class::inbound(scope),
                Cluster {
                    name: src.cluster.clone(),
                    cluster_discovery_type: Some(ClusterDiscoveryType::Type(kind as i32)),
                    connect_timeout: Some(crate::xds::generate::shared::util::duration(std::time::Duration::from_secs(5))),
                    load_assignment: Some(ClusterLoadAssignment {
                        cluster_name: src.cluster.clone(),
                        endpoints: vec![LocalityLbEndpoints {
                            lb_endpoints: vec![LbEndpoint {
                                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(
                                    Endpoint {
                                        address: Some(crate::xds::generate::shared::cluster::socket(
                                            &src.host,
                                            u32::from(src.port),
                                        )),
                                        ..Default::default()
                                    },
                                )),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    transport_socket: tls,
                    ..Default::default()
                },
            )
        })
        .collect()
}

/// Claims whose value is a space-separated list (`scope: "read write"` matches `read`): OAuth's
/// `scope` and `permission` always, as istiod, plus the rule's own, sorted.
fn space_delimited_claims(extra: &[String]) -> Vec<String> {
    let mut claims: std::collections::BTreeSet<String> =
        ["permission", "scope"].map(String::from).into();
    claims.extend(extra.iter().cloned());
    claims.into_iter().collect()
}

/// The jwt rules of the RequestAuthentications that select `proxy`, with their provider names.
fn selected_rules<'a>(
    ctx: &'a PushContext,
    scope: &'a ScopeView,
    served: Option<&crate::model::Service>,
) -> Vec<(String, &'a JwtRule)> {
    let mut out = Vec::new();
    for c in ctx.selecting_served(scope, Kind::RequestAuthentication, served) {
        let Spec::RequestAuthentication(ra) = &c.spec else {
            continue;
        };
        let (ns, name) = (&c.metadata.namespace, &c.metadata.name);
        for (i, rule) in ra.jwt_rules.iter().enumerate() {
            out.push((format!("origins-{ns}-{name}-{i}"), rule));
        }
    }
    out
}

/// `clear_route_cache`: the route is chosen again once the token is verified, so routes may match
/// its claims (`@request.auth.claims.…`); istiod asks it of every proxy but sidecars.
fn provider(ctx: &PushContext, rule: &JwtRule, clear_route_cache: bool) -> Option<JwtProvider> {
    let keys = keys(ctx, rule)?;
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
        forward_payload_header: rule.output_payload_to_header.clone(),
        claim_to_headers: rule
            .output_claim_to_headers
            .iter()
            .map(|c| JwtClaimToHeader {
                header_name: c.header.clone(),
                claim_name: c.claim.clone(),
                ..Default::default()
            })
            .collect(),
        normalize_payload_in_metadata: Some(jwt_provider::NormalizePayload {
            space_delimited_claims: space_delimited_claims(&rule.space_delimited_claims),
        }),
        payload_in_metadata: PAYLOAD_KEY.into(),
        jwks_source_specifier: Some(keys),
        clear_route_cache,
        ..Default::default()
    })
}

/// The jwt_authn filter for the RequestAuthentications that select `proxy` (none: no filter).
pub fn http_filter(ctx: &PushContext, scope: &ScopeView) -> Option<HttpFilter> {
    http_filter_for(ctx, scope, None)
}

/// [`http_filter`] for a waypoint's chain of `served`'s traffic.
pub fn http_filter_for(
    ctx: &PushContext,
    scope: &ScopeView,
    served: Option<&crate::model::Service>,
) -> Option<HttpFilter> {
    let providers: BTreeMap<String, JwtProvider> = selected_rules(ctx, scope, served)
        .into_iter()
        .filter_map(|(name, rule)| {
            provider(ctx, rule, scope.proxy_type != ProxyType::Sidecar).map(|p| (name, p))
        })
        .collect();
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
    payload_at(&[field], value)
}

/// A claim (`claims` is its path in the verified payload: `[groups]`, or `[org, team]` for a
/// nested one) that is `value` or, for a list claim, holds an element that is: istiod's
/// translation of `request.auth.claims[…]`, `request.auth.audiences` (`aud`) and
/// `request.auth.presenter` (`azp`).
pub fn claim_principal(claims: &[&str], value: StringMatcher) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::SourcedMetadata(SourcedMetadata {
            metadata_source: 0,
            metadata_matcher: Some(claim_matcher(claims, Some(value))),
        })),
    }
}

fn payload_at(fields: &[&str], value: value_matcher::MatchPattern) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::SourcedMetadata(SourcedMetadata {
            metadata_source: 0,
            metadata_matcher: Some(payload_matcher(fields, value)),
        })),
    }
}

fn string(pattern: string_matcher::MatchPattern) -> value_matcher::MatchPattern {
    value_matcher::MatchPattern::StringMatch(StringMatcher {
        match_pattern: Some(pattern),
        ignore_case: false,
    })
}

/// A `requestPrincipals` value (or `request.auth.principal`) as a match on the verified payload's
/// `iss` and `sub`, as istiod translates it: the value splits at its last `/` (an issuer may be a
/// URL); `*` is any issuer and subject; a leading `*` matches the issuer's suffix (`*/sub`: any
/// issuer) or, without a `/`, the subject's; a trailing `*` the subject's prefix (`iss/*`: any
/// subject) or, without a `/`, the issuer's; anything else is exact (a value without `/` is an
/// issuer with an empty subject). "Any" is a non-empty string, so a token without the claim
/// never matches it.
pub fn request_principal(value: &str) -> Option<Principal> {
    use string_matcher::MatchPattern as M;
    let any = || {
        M::SafeRegex(envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher {
            regex: ".+".into(),
            ..Default::default()
        })
    };
    let split = value.rsplit_once('/');
    let (iss, sub) = split.unwrap_or((value, ""));
    let (issuer, subject) = if value == "*" {
        (any(), any())
    } else if let Some(rest) = value.strip_prefix('*') {
        match split {
            Some(("*", _)) => (any(), M::Exact(sub.into())),
            Some(_) => (
                M::Suffix(iss.strip_prefix('*').unwrap_or(iss).into()),
                M::Exact(sub.into()),
            ),
            None => (any(), M::Suffix(rest.into())),
        }
    } else if let Some(rest) = value.strip_suffix('*') {
        match split {
            Some((_, "*")) => (M::Exact(iss.into()), any()),
            Some(_) => (
                M::Exact(iss.into()),
                M::Prefix(sub.strip_suffix('*').unwrap_or(sub).into()),
            ),
            None => (M::Prefix(rest.into()), any()),
        }
    } else {
        (M::Exact(iss.into()), M::Exact(sub.into()))
    };
    Some(Principal {
        identifier: Some(principal::Identifier::AndIds(principal::Set {
            ids: vec![
                payload("iss", string(issuer)),
                payload("sub", string(subject)),
            ],
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::r#type::matcher::v3::metadata_matcher;

    /// Whether `p` admits a request whose verified token has these `iss` and `sub` claims (`None`:
    /// the claim is absent), as Envoy's RBAC filter evaluates the matchers built here.
    fn admits(p: &Principal, iss: Option<&str>, sub: Option<&str>) -> bool {
        use principal::Identifier as I;
        match p.identifier.as_ref().expect("an identifier") {
            I::AndIds(set) => set.ids.iter().all(|p| admits(p, iss, sub)),
            I::OrIds(set) => set.ids.iter().any(|p| admits(p, iss, sub)),
            I::NotId(p) => !admits(p, iss, sub),
            I::SourcedMetadata(m) => {
                let m = m.metadata_matcher.as_ref().expect("a matcher");
                assert_eq!(m.filter, JWT_FILTER);
                let keys: Vec<&str> = m
                    .path
                    .iter()
                    .map(|s| match &s.segment {
                        Some(metadata_matcher::path_segment::Segment::Key(k)) => k.as_str(),
                        None => "",
                    })
                    .collect();
                let claim = match keys.as_slice() {
                    [PAYLOAD_KEY, "iss"] => iss,
                    [PAYLOAD_KEY, "sub"] => sub,
                    other => panic!("unexpected path {other:?}"),
                };
                let Some(value) = claim else {
                    return false;
                };
                let pattern = m.value.as_ref().and_then(|v| v.match_pattern.as_ref());
                let Some(value_matcher::MatchPattern::StringMatch(s)) = pattern else {
                    panic!("unexpected value matcher {pattern:?}");
                };
                match s.match_pattern.as_ref().expect("a pattern") {
                    string_matcher::MatchPattern::Exact(e) => value == e,
                    string_matcher::MatchPattern::Prefix(e) => value.starts_with(e.as_str()),
                    string_matcher::MatchPattern::Suffix(e) => value.ends_with(e.as_str()),
                    string_matcher::MatchPattern::SafeRegex(r) => {
                        regex::Regex::new(&format!("^(?:{})$", r.regex))
                            .unwrap()
                            .is_match(value)
                    }
                    other => panic!("unexpected string matcher {other:?}"),
                }
            }
            other => panic!("unexpected identifier {other:?}"),
        }
    }

    /// Every form istiod 1.30 translates (`requestPrincipalGenerator`), with the tokens each
    /// admits and refuses.
    #[test]
    fn request_principals_match_as_istiod_translates_them() {
        let iss = "https://accounts.example.com";
        // (value, admitted (iss, sub) pairs, refused pairs)
        type Claims<'a> = (Option<&'a str>, Option<&'a str>);
        let cases: [(&str, &[Claims], &[Claims]); 12] = [
            (
                "*",
                &[(Some(iss), Some("bob"))],
                &[
                    (Some(iss), None),
                    (None, Some("bob")),
                    (Some(iss), Some("")),
                ],
            ),
            (
                "https://accounts.example.com/bob",
                &[(Some(iss), Some("bob"))],
                &[
                    (Some(iss), Some("bobby")),
                    (Some("https://accounts.example.co"), Some("bob")),
                ],
            ),
            (
                "https://accounts.example.com/*",
                &[(Some(iss), Some("anyone"))],
                &[
                    (Some(iss), Some("")),
                    (Some(iss), None),
                    (Some("https://other"), Some("bob")),
                ],
            ),
            (
                "*/bob",
                &[(Some(iss), Some("bob")), (Some("x"), Some("bob"))],
                &[(Some(iss), Some("alice")), (None, Some("bob"))],
            ),
            (
                "*example.com/bob",
                &[(Some(iss), Some("bob")), (Some("example.com"), Some("bob"))],
                &[
                    (Some("https://example.org"), Some("bob")),
                    (Some(iss), Some("bo")),
                ],
            ),
            (
                "https://accounts.example.com/svc-*",
                &[(Some(iss), Some("svc-a")), (Some(iss), Some("svc-"))],
                &[
                    (Some(iss), Some("user-a")),
                    (Some("https://other"), Some("svc-a")),
                ],
            ),
            (
                "*-admin",
                &[(Some(iss), Some("ops-admin"))],
                &[(Some(iss), Some("ops-user")), (Some(iss), None)],
            ),
            (
                "issuer-*",
                &[(Some("issuer-a"), Some("x")), (Some("issuer-"), Some("y"))],
                &[(Some("other"), Some("x")), (Some("issuer-a"), None)],
            ),
            // The last `/` splits, so a URL issuer with a trailing `*` is a subject prefix.
            (
                "https://accounts*",
                &[(Some("https:/"), Some("accounts-x"))],
                &[(Some(iss), Some("x"))],
            ),
            // No `/`: an issuer whose subject is empty.
            (
                "https:",
                &[(Some("https:"), Some(""))],
                &[(Some("https:"), Some("x"))],
            ),
            // istiod's quirk kept: `*/*` is any issuer with the subject `*` itself.
            (
                "*/*",
                &[(Some(iss), Some("*"))],
                &[(Some(iss), Some("bob"))],
            ),
            // A `*` inside is literal.
            (
                "https://a*b/c",
                &[(Some("https://a*b"), Some("c"))],
                &[(Some("https://axb"), Some("c"))],
            ),
        ];
        for (value, admitted, refused) in cases {
            let p = request_principal(value).expect("every form translates");
            for (i, s) in admitted {
                assert!(admits(&p, *i, *s), "{value} must admit iss={i:?} sub={s:?}");
            }
            for (i, s) in refused {
                assert!(
                    !admits(&p, *i, *s),
                    "{value} must refuse iss={i:?} sub={s:?}"
                );
            }
        }
    }
}

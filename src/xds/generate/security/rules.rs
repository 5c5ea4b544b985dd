//! An AuthorizationPolicy rule's fields as Envoy RBAC permissions and principals, as istiod's
//! `pilot/pkg/security/authz/model` builds them: operations (paths, methods, hosts, ports, headers), sources
//! (principals, namespaces, IPs, request principals), conditions, and the trust-domain aliases
//! of principals.

use crate::config::security::{Condition, Operation, Rule, Source};
use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::rbac::v3::{Permission, Principal, permission, principal};
use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, header_matcher};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    PathMatcher, RegexMatcher, StringMatcher, path_matcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::UInt32Value;

/// One AuthorizationPolicy value turned into an Envoy permission or principal (`None`: unusable).
type ToPermission<'a> = &'a dyn Fn(&str) -> Option<Permission>;
type ToPrincipal<'a> = &'a dyn Fn(&str) -> Option<Principal>;
type OwnedToPrincipal = Box<dyn Fn(&str) -> Option<Principal>>;
type OwnedToPermission = Box<dyn Fn(&str) -> Option<Permission>>;

fn and_rules(rules: Vec<Permission>) -> Permission {
    match rules.len() {
        0 => any_permission(),
        1 => rules.into_iter().next().unwrap_or_else(any_permission),
        _ => Permission {
            rule: Some(permission::Rule::AndRules(permission::Set { rules })),
        },
    }
}

fn or_rules(rules: Vec<Permission>) -> Permission {
    Permission {
        rule: Some(permission::Rule::OrRules(permission::Set { rules })),
    }
}

fn not_rule(p: Permission) -> Permission {
    Permission {
        rule: Some(permission::Rule::NotRule(Box::new(p))),
    }
}

fn any_permission() -> Permission {
    Permission {
        rule: Some(permission::Rule::Any(true)),
    }
}

fn and_ids(ids: Vec<Principal>) -> Principal {
    match ids.len() {
        0 => any_principal(),
        1 => ids.into_iter().next().unwrap_or_else(any_principal),
        _ => Principal {
            identifier: Some(principal::Identifier::AndIds(principal::Set { ids })),
        },
    }
}

fn or_ids(ids: Vec<Principal>) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::OrIds(principal::Set { ids })),
    }
}

fn not_id(p: Principal) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::NotId(Box::new(p))),
    }
}

fn any_principal() -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Any(true)),
    }
}

/// Istio's value forms: `*` any non-empty value, `x*` prefix, `*x` suffix, else exact; `prefix` is
/// prepended to the literal part (principals are matched as `spiffe://...`).
fn matcher(value: &str, prefix: &str, ignore_case: bool) -> StringMatcher {
    let pattern = if value == "*" {
        MatchPattern::SafeRegex(RegexMatcher {
            regex: format!("{}.+", regex::escape(prefix)),
            ..Default::default()
        })
    } else if let Some(p) = value.strip_suffix('*') {
        MatchPattern::Prefix(format!("{prefix}{p}"))
    } else if let Some(s) = value.strip_prefix('*') {
        MatchPattern::Suffix(s.to_string())
    } else {
        MatchPattern::Exact(format!("{prefix}{value}"))
    };
    StringMatcher {
        match_pattern: Some(pattern),
        ignore_case,
    }
}

fn header(name: &str, value: &str, ignore_case: bool) -> HeaderMatcher {
    HeaderMatcher {
        name: name.into(),
        header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(matcher(
            value,
            "",
            ignore_case,
        ))),
        ..Default::default()
    }
}

fn cidr(value: &str) -> Option<CidrRange> {
    let net: ipnet::IpNet = value
        .parse()
        .or_else(|_| value.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .ok()?;
    Some(CidrRange {
        address_prefix: net.addr().to_string(),
        prefix_len: Some(UInt32Value {
            value: u32::from(net.prefix_len()),
        }),
    })
}

/// Values as OR-ed permissions; empty → None (the field does not constrain).
fn any_of_p(values: &[String], each: impl Fn(&str) -> Option<Permission>) -> Option<Permission> {
    let rules: Vec<Permission> = values.iter().filter_map(|v| each(v)).collect();
    (!values.is_empty()).then(|| or_rules(rules))
}

fn any_of_i(values: &[String], each: impl Fn(&str) -> Option<Principal>) -> Option<Principal> {
    let ids: Vec<Principal> = values.iter().filter_map(|v| each(v)).collect();
    (!values.is_empty()).then(|| or_ids(ids))
}

fn path(v: &str) -> Option<Permission> {
    // `{*}` and `{**}` make a URI template, matched by Envoy's uri_template extension.
    if v.contains("{*}") || v.contains("{**}") {
        let template = envoy_types::pb::envoy::extensions::path::r#match::uri_template::v3::UriTemplateMatchConfig {
            path_template: v.replace("{**}", "**").replace("{*}", "*"),
        };
        return Some(Permission {
            rule: Some(permission::Rule::UriTemplate(
                envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig {
                    name: "uri-template".into(),
                    typed_config: Some(crate::xds::generate::encode::any(&template)),
                },
            )),
        });
    }
    Some(Permission {
        rule: Some(permission::Rule::UrlPath(PathMatcher {
            rule: Some(path_matcher::Rule::Path(matcher(v, "", false))),
        })),
    })
}

fn header_perm(name: &'static str, ignore_case: bool) -> impl Fn(&str) -> Option<Permission> {
    move |v| {
        Some(Permission {
            rule: Some(permission::Rule::Header(header(name, v, ignore_case))),
        })
    }
}

fn port(v: &str) -> Option<Permission> {
    Some(Permission {
        rule: Some(permission::Rule::DestinationPort(v.parse().ok()?)),
    })
}

fn destination_ip(v: &str) -> Option<Permission> {
    Some(Permission {
        rule: Some(permission::Rule::DestinationIp(cidr(v)?)),
    })
}

/// What a rule's `to` operations and destination-side `when` conditions allow: any operation (OR),
/// each operation all of its fields (AND).
pub(super) fn permission_for<'a>(
    operations: impl Iterator<Item = &'a Operation>,
    when: &[Condition],
) -> Permission {
    let ops: Vec<Permission> = operations
        .map(|op| {
            let mut all = Vec::new();
            let fields: [(&[String], bool, ToPermission); 8] = [
                (&op.hosts, false, &header_perm(":authority", true)),
                (&op.not_hosts, true, &header_perm(":authority", true)),
                (&op.methods, false, &header_perm(":method", false)),
                (&op.not_methods, true, &header_perm(":method", false)),
                (&op.paths, false, &path),
                (&op.not_paths, true, &path),
                (&op.ports, false, &port),
                (&op.not_ports, true, &port),
            ];
            for (values, negate, each) in fields {
                if let Some(p) = any_of_p(values, each) {
                    all.push(if negate { not_rule(p) } else { p });
                }
            }
            and_rules(all)
        })
        .collect();
    let mut all = Vec::new();
    if !ops.is_empty() {
        all.push(or_rules(ops));
    }
    for c in when {
        let filter_value = filter_metadata(&c.key);
        let each: ToPermission = match (c.key.as_str(), &filter_value) {
            ("destination.port", _) => &port,
            ("destination.ip", _) => &destination_ip,
            ("request.headers[:authority]", _) => &header_perm_auth,
            ("connection.sni", _) => &server_name,
            (_, Some(f)) => f,
            _ => continue,
        };
        if let Some(p) = any_of_p(&c.values, each) {
            all.push(p);
        }
        if let Some(p) = any_of_p(&c.not_values, each) {
            all.push(not_rule(p));
        }
    }
    and_rules(all)
}

/// `experimental.envoy.filters.<filter>[<key>]`: a value another filter put in its dynamic
/// metadata (istiod's translation; a value written `[v]` matches an element of a list).
fn filter_metadata(key: &str) -> Option<OwnedToPermission> {
    let (filter, field) = crate::config::security::envoy_filter_key(key)?;
    let (filter, field) = (filter.to_string(), field.to_string());
    Some(Box::new(move |v: &str| {
        use envoy_types::pb::envoy::r#type::matcher::v3::{
            ListMatcher, MetadataMatcher, ValueMatcher, list_matcher, metadata_matcher,
            value_matcher,
        };
        let string = |v: &str| ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::StringMatch(matcher(
                v, "", false,
            ))),
        };
        let value = match v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            Some(element) => ValueMatcher {
                match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
                    ListMatcher {
                        match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(string(
                            element,
                        )))),
                    },
                ))),
            },
            None => string(v),
        };
        Some(Permission {
            rule: Some(permission::Rule::SourcedMetadata(
                envoy_types::pb::envoy::config::rbac::v3::SourcedMetadata {
                    metadata_source: 0,
                    metadata_matcher: Some(MetadataMatcher {
                        filter: filter.clone(),
                        path: vec![metadata_matcher::PathSegment {
                            segment: Some(metadata_matcher::path_segment::Segment::Key(
                                field.clone(),
                            )),
                        }],
                        value: Some(value),
                        invert: false,
                    }),
                },
            )),
        })
    }))
}

/// The TLS server name the connection asked for (istiod's `connection.sni`).
fn server_name(v: &str) -> Option<Permission> {
    Some(Permission {
        rule: Some(permission::Rule::RequestedServerName(matcher(v, "", false))),
    })
}

fn header_perm_auth(v: &str) -> Option<Permission> {
    header_perm(":authority", true)(v)
}

/// `rule` with every principal (`principals`, `notPrincipals`, `source.principal`) written for the
/// mesh's trust domain, an alias of it, or `cluster.local` (istiod's name for the local trust
/// domain) matching in the trust domain and every alias, as istiod rewrites them. Principals that
/// do not name a trust domain (`*`, `*/ns/…`) or name another one stay as written.
pub(super) fn with_trust_domains(rule: &Rule, trust_domains: &[&str]) -> Rule {
    let expand = |values: &[String]| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for v in values {
            let td = (!v.starts_with('*')).then(|| v.split_once("/ns/").map(|(td, _)| td));
            match td.flatten() {
                Some(td) if td == "cluster.local" || trust_domains.contains(&td) => {
                    for other in trust_domains {
                        let rewritten = format!("{other}{}", &v[td.len()..]);
                        if !out.contains(&rewritten) {
                            out.push(rewritten);
                        }
                    }
                }
                _ => {
                    if !out.contains(v) {
                        out.push(v.clone());
                    }
                }
            }
        }
        out
    };
    let mut out = rule.clone();
    for from in out.from.iter_mut().flatten() {
        if let Some(s) = from.source.as_mut() {
            s.principals = expand(&s.principals);
            s.not_principals = expand(&s.not_principals);
        }
    }
    for c in &mut out.when {
        if c.key == "source.principal" {
            c.values = expand(&c.values);
            c.not_values = expand(&c.not_values);
        }
    }
    out
}

fn authenticated(v: &str) -> Option<Principal> {
    Some(Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(matcher(v, "spiffe://", false)),
            },
        )),
    })
}

/// A service account, `<name>` (in the policy's namespace) or `<namespace>/<name>`, as istiod
/// matches it in the peer's SPIFFE identity.
fn service_account(policy_ns: &str, v: &str) -> Option<Principal> {
    let (ns, sa) = v.split_once('/').unwrap_or((policy_ns, v));
    Some(authenticated_regex(format!(
        "spiffe://.+/ns/{}/(.+/|)sa/{}(/.+)?",
        regex::escape(ns),
        regex::escape(sa)
    )))
}

/// A trust domain of the peer's SPIFFE identity (`*` any; one `*` inside a name, any run of
/// characters but `/`).
fn trust_domain(v: &str) -> Option<Principal> {
    let pattern = match v.split_once('*') {
        None => format!("spiffe://{}/.*", regex::escape(v)),
        Some(("", "")) => "spiffe://.*".to_string(),
        Some((a, b)) => format!("spiffe://{}[^/]*{}/.*", regex::escape(a), regex::escape(b)),
    };
    Some(authenticated_regex(pattern))
}

fn authenticated_regex(regex: String) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(StringMatcher {
                    match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                        regex,
                        ..Default::default()
                    })),
                    ignore_case: false,
                }),
            },
        )),
    }
}

/// A namespace as the peer identity's `/ns/<namespace>/` segment.
fn namespace(v: &str) -> Option<Principal> {
    let ns = if v == "*" {
        ".+".to_string()
    } else if let Some(p) = v.strip_suffix('*') {
        format!("{}.*", regex::escape(p))
    } else if let Some(s) = v.strip_prefix('*') {
        format!(".*{}", regex::escape(s))
    } else {
        regex::escape(v)
    };
    Some(Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(StringMatcher {
                    match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                        regex: format!(".*/ns/{ns}/.*"),
                        ..Default::default()
                    })),
                    ignore_case: false,
                }),
            },
        )),
    })
}

fn direct_ip(v: &str) -> Option<Principal> {
    Some(Principal {
        identifier: Some(principal::Identifier::DirectRemoteIp(cidr(v)?)),
    })
}

fn remote_ip(v: &str) -> Option<Principal> {
    Some(Principal {
        identifier: Some(principal::Identifier::RemoteIp(cidr(v)?)),
    })
}

/// Request principals (`iss/sub`) as the JWT payload the jwt_authn filter verified.
fn request_principal(v: &str) -> Option<Principal> {
    super::jwt::request_principal(v)
}

/// Who a rule's `from` sources and source-side `when` conditions admit: any source (OR), each
/// source all of its fields (AND).
pub(super) fn principal_for<'a>(
    sources: impl Iterator<Item = &'a Source>,
    when: &[Condition],
    policy_ns: &str,
) -> Principal {
    let service_account = |v: &str| service_account(policy_ns, v);
    let srcs: Vec<Principal> = sources
        .map(|s| {
            let mut all = Vec::new();
            let fields: [(&[String], bool, ToPrincipal); 14] = [
                (&s.principals, false, &authenticated),
                (&s.not_principals, true, &authenticated),
                (&s.namespaces, false, &namespace),
                (&s.not_namespaces, true, &namespace),
                (&s.ip_blocks, false, &direct_ip),
                (&s.not_ip_blocks, true, &direct_ip),
                (&s.remote_ip_blocks, false, &remote_ip),
                (&s.not_remote_ip_blocks, true, &remote_ip),
                (&s.request_principals, false, &request_principal),
                (&s.not_request_principals, true, &request_principal),
                (&s.service_accounts, false, &service_account),
                (&s.not_service_accounts, true, &service_account),
                (&s.trust_domains, false, &trust_domain),
                (&s.not_trust_domains, true, &trust_domain),
            ];
            for (values, negate, each) in fields {
                if let Some(p) = any_of_i(values, each) {
                    all.push(if negate { not_id(p) } else { p });
                }
            }
            and_ids(all)
        })
        .collect();
    let mut all = Vec::new();
    if !srcs.is_empty() {
        all.push(or_ids(srcs));
    }
    for c in when {
        let key = c.key.as_str();
        let claim_path: Option<Vec<String>> = crate::config::security::jwt_claim_path(key)
            .map(|p| p.into_iter().map(String::from).collect());
        let header_name = key
            .strip_prefix("request.headers[")
            .and_then(|k| k.strip_suffix(']'))
            .filter(|k| *k != ":authority")
            .map(str::to_string);
        let each: OwnedToPrincipal = match (key, header_name, claim_path) {
            ("source.ip", ..) => Box::new(direct_ip),
            ("remote.ip", ..) => Box::new(remote_ip),
            ("source.principal", ..) => Box::new(authenticated),
            ("source.namespace", ..) => Box::new(namespace),
            ("source.serviceAccount", ..) => {
                let ns = policy_ns.to_string();
                Box::new(move |v: &str| self::service_account(&ns, v))
            }
            ("source.trustDomain", ..) => Box::new(trust_domain),
            ("request.auth.principal", ..) => Box::new(request_principal),
            ("request.auth.audiences", ..) => Box::new(|v: &str| {
                Some(super::jwt::claim_principal(&["aud"], matcher(v, "", false)))
            }),
            ("request.auth.presenter", ..) => Box::new(|v: &str| {
                Some(super::jwt::claim_principal(&["azp"], matcher(v, "", false)))
            }),
            (_, _, Some(path)) => Box::new(move |v: &str| {
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                Some(super::jwt::claim_principal(&path, matcher(v, "", false)))
            }),
            (_, Some(name), _) => Box::new(move |v: &str| {
                Some(Principal {
                    identifier: Some(principal::Identifier::Header(header(&name, v, false))),
                })
            }),
            _ => continue,
        };
        if let Some(p) = any_of_i(&c.values, &each) {
            all.push(p);
        }
        if let Some(p) = any_of_i(&c.not_values, &each) {
            all.push(not_id(p));
        }
    }
    and_ids(all)
}

#[cfg(test)]
mod trust_domain_tests {
    use super::*;

    #[test]
    fn principals_of_the_local_trust_domain_match_in_every_alias() {
        let rule: Rule = serde_json::from_value(serde_json::json!({
            "from": [{"source": {"principals": [
                "cluster.local/ns/a/sa/b", "old.org/ns/c/sa/d", "other.org/ns/e/sa/f", "*/ns/g/sa/h"
            ]}}],
            "when": [{"key": "source.principal", "values": ["example.org/ns/x/sa/y"]}]
        }))
        .unwrap();
        let out = with_trust_domains(&rule, &["example.org", "old.org"]);
        let principals = &out.from.as_ref().unwrap()[0]
            .source
            .as_ref()
            .unwrap()
            .principals;
        assert_eq!(
            principals,
            &[
                "example.org/ns/a/sa/b",
                "old.org/ns/a/sa/b",
                "example.org/ns/c/sa/d",
                "old.org/ns/c/sa/d",
                "other.org/ns/e/sa/f",
                "*/ns/g/sa/h"
            ]
        );
        assert_eq!(
            out.when[0].values,
            ["example.org/ns/x/sa/y", "old.org/ns/x/sa/y"]
        );
    }
}

//! AuthorizationPolicy → Envoy RBAC HTTP filters, on the server side of a proxy (gateway listeners and
//! sidecar inbound): one DENY filter, then one ALLOW filter, as istiod orders them. A request is
//! denied when any DENY policy matches, or when ALLOW policies exist and none matches.

use super::rbac::{NETWORK_RBAC_FILTER, RBAC_FILTER, from_tunnel_peer, rbac_bytes};
use crate::config::security::{
    AuthorizationAction, AuthorizationPolicy, Condition, Operation, Rule, Source,
};
use crate::config::security::{is_dry_run, when_key_expressible};
use crate::config::{Kind, Spec};
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::put_field;
use crate::xds::generate::typed_listener::NetworkFilter;
use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig;
use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, permission, principal, rbac,
};
use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, header_matcher};
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    PathMatcher, RegexMatcher, StringMatcher, path_matcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use std::collections::BTreeMap;
use tracing::warn;

/// One AuthorizationPolicy value turned into an Envoy permission or principal (`None`: unusable).
type ToPermission<'a> = &'a dyn Fn(&str) -> Option<Permission>;
type ToPrincipal<'a> = &'a dyn Fn(&str) -> Option<Principal>;
type OwnedToPrincipal = Box<dyn Fn(&str) -> Option<Principal>>;
type OwnedToPermission = Box<dyn Fn(&str) -> Option<Permission>>;

/// The AuthorizationPolicies that apply to `proxy`, with their namespace, name and whether they
/// are dry run.
fn policies_for<'a>(
    ctx: &'a PushContext,
    scope: &'a ScopeView,
    served: Option<&Service>,
) -> Vec<(&'a str, &'a str, &'a AuthorizationPolicy, bool)> {
    ctx.selecting_served(scope, Kind::AuthorizationPolicy, served)
        .into_iter()
        .filter_map(|c| match &c.spec {
            Spec::AuthorizationPolicy(p) => Some((
                c.metadata.namespace.as_str(),
                c.metadata.name.as_str(),
                p,
                is_dry_run(&c.metadata.annotations),
            )),
            _ => None,
        })
        .collect()
}

/// The policies that apply to a proxy, grouped by what Envoy does with them.
#[derive(Default)]
struct Rules {
    deny: BTreeMap<String, Policy>,
    allow: BTreeMap<String, Policy>,
    audit: BTreeMap<String, Policy>,
    /// CUSTOM rules (named `istio-ext-authz-…`) and the provider they use.
    custom: BTreeMap<String, Policy>,
    provider: Option<String>,
    /// CUSTOM policies name more than one provider: as istiod (without its multi-provider
    /// feature), every CUSTOM rule denies instead.
    several_providers: bool,
    /// An ALLOW policy without (usable) rules still applies: it allows nothing.
    any_allow: bool,
    /// Dry-run (`istio.io/dry-run`) ALLOW and DENY rules: Envoy evaluates them as shadow rules,
    /// counting and logging what they would decide, and enforces nothing.
    dry_allow: BTreeMap<String, Policy>,
    dry_deny: BTreeMap<String, Policy>,
    /// As `any_allow`, for dry-run ALLOW policies.
    any_dry_allow: bool,
}

impl Rules {
    fn custom_provider(&self) -> super::extauthz::CustomProvider<'_> {
        use super::extauthz::CustomProvider;
        match (&self.provider, self.several_providers) {
            (_, true) => CustomProvider::Several,
            (Some(p), false) => CustomProvider::One(p),
            (None, false) => CustomProvider::None,
        }
    }
}

/// Fields only HTTP requests have. On TCP, istiod drops an ALLOW rule using them (it can never
/// match) and keeps a DENY rule without them (it matches more): both stricter than asked.
fn uses_http(rule: &Rule) -> bool {
    rule.to
        .iter()
        .flatten()
        .filter_map(|t| t.operation.as_ref())
        .any(|o| {
            !(o.hosts.is_empty()
                && o.not_hosts.is_empty()
                && o.methods.is_empty()
                && o.not_methods.is_empty()
                && o.paths.is_empty()
                && o.not_paths.is_empty())
        })
        || rule
            .from
            .iter()
            .flatten()
            .filter_map(|f| f.source.as_ref())
            .any(|s| {
                !(s.request_principals.is_empty()
                    && s.not_request_principals.is_empty()
                    && s.remote_ip_blocks.is_empty()
                    && s.not_remote_ip_blocks.is_empty())
            })
        || rule.when.iter().any(|c| http_condition(&c.key))
}

fn http_condition(key: &str) -> bool {
    key.starts_with("request.") || key == "remote.ip"
}

/// `rule` without its HTTP-only fields.
fn l4_only(rule: &Rule) -> Rule {
    let mut r = rule.clone();
    for op in
        r.to.iter_mut()
            .flatten()
            .filter_map(|t| t.operation.as_mut())
    {
        op.hosts.clear();
        op.not_hosts.clear();
        op.methods.clear();
        op.not_methods.clear();
        op.paths.clear();
        op.not_paths.clear();
    }
    for src in r
        .from
        .iter_mut()
        .flatten()
        .filter_map(|f| f.source.as_mut())
    {
        src.request_principals.clear();
        src.not_request_principals.clear();
        src.remote_ip_blocks.clear();
        src.not_remote_ip_blocks.clear();
    }
    r.when.retain(|c| !http_condition(&c.key));
    r
}

fn rules_for(
    ctx: &PushContext,
    scope: &ScopeView,
    tcp: bool,
    served: Option<&Service>,
    tunnel: bool,
) -> Rules {
    // A waypoint's traffic (and a sidecar's HBONE) arrives over an internal listener: the peer's
    // identity is the one the HBONE tunnel presented, kept in filter state, not a certificate of
    // the connection.
    let waypoint = tunnel || scope.proxy_type == crate::xds::proxy::ProxyType::Waypoint;
    let mut out = Rules::default();
    let trust_domains: Vec<&str> = std::iter::once(ctx.mesh.trust_domain.as_str())
        .chain(ctx.mesh.trust_domain_aliases.iter().map(String::as_str))
        .collect();
    for (ns, name, p, dry_run) in policies_for(ctx, scope, served) {
        let target = match p.action {
            AuthorizationAction::ALLOW if dry_run => {
                out.any_dry_allow = true;
                &mut out.dry_allow
            }
            AuthorizationAction::DENY if dry_run => &mut out.dry_deny,
            AuthorizationAction::ALLOW => {
                out.any_allow = true;
                &mut out.allow
            }
            AuthorizationAction::DENY => &mut out.deny,
            AuthorizationAction::AUDIT => &mut out.audit,
            AuthorizationAction::CUSTOM => {
                let wanted = p
                    .provider
                    .as_ref()
                    .map(|pr| pr.name.clone())
                    .unwrap_or_default();
                match &out.provider {
                    None => out.provider = Some(wanted),
                    Some(chosen) if *chosen == wanted => {}
                    Some(chosen) => {
                        // istiod allows one provider per workload as well, and denies instead.
                        warn!(policy = %format!("{ns}/{name}"), provider = %wanted, other = %chosen,
                            "only one CUSTOM provider per workload; what the CUSTOM policies match is denied");
                        out.several_providers = true;
                    }
                }
                &mut out.custom
            }
        };
        let prefix = if p.action == AuthorizationAction::CUSTOM {
            "istio-ext-authz-"
        } else {
            ""
        };
        for (i, rule) in p.rules.iter().flatten().enumerate() {
            // Fail closed: a condition the translation cannot express would be dropped, which
            // widens the rule. That is safe for DENY (denies more) and CUSTOM (asks the
            // authorizer more often), not for ALLOW or AUDIT: such a rule is left out instead.
            if let Some(c) = rule.when.iter().find(|c| !when_key_expressible(&c.key))
                && matches!(
                    p.action,
                    AuthorizationAction::ALLOW | AuthorizationAction::AUDIT
                )
            {
                warn!(policy = %format!("{ns}/{name}"), rule = i, key = %c.key,
                    "condition not supported yet; the rule is left out, so it allows nothing");
                continue;
            }
            let aliased = with_trust_domains(rule, &trust_domains);
            let rule = &aliased;
            let stripped;
            let rule = match (tcp && uses_http(rule), p.action) {
                (false, _) => rule,
                (true, AuthorizationAction::DENY | AuthorizationAction::CUSTOM) => {
                    stripped = l4_only(rule);
                    &stripped
                }
                (true, _) => continue,
            };
            target.insert(
                format!("{prefix}ns[{ns}]-policy[{name}]-rule[{i}]"),
                Policy {
                    permissions: vec![permission_for(
                        rule.to
                            .iter()
                            .flatten()
                            .filter_map(|t| t.operation.as_ref()),
                        &rule.when,
                    )],
                    principals: vec![{
                        let p = principal_for(
                            rule.from.iter().flatten().filter_map(|f| f.source.as_ref()),
                            &rule.when,
                            ns,
                        );
                        if waypoint { from_tunnel_peer(p) } else { p }
                    }],
                    ..Default::default()
                },
            );
        }
    }
    out
}

/// The authorization HTTP filters for `proxy`: CUSTOM (ext_authz), AUDIT (logs only), DENY, ALLOW
/// (none when no policy applies).
pub fn http_filters(ctx: &PushContext, scope: &ScopeView) -> Vec<HttpFilter> {
    http_filters_for(ctx, scope, None, false)
}

/// [`http_filters`] for a waypoint's chain of `served`'s traffic, or (`tunnel`) for what a
/// sidecar takes over HBONE: the peer is the tunnel's.
pub fn http_filters_for(
    ctx: &PushContext,
    scope: &ScopeView,
    served: Option<&Service>,
    tunnel: bool,
) -> Vec<HttpFilter> {
    let rules = rules_for(ctx, scope, false, served, tunnel);
    let mut out = super::extauthz::http_filters(ctx, &rules.custom, rules.custom_provider());
    out.extend(
        rbac_configs(&rules, Layer::Http)
            .into_iter()
            .map(|value| HttpFilter {
                name: RBAC_FILTER.into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(Any {
                    type_url: <HttpRbac as prost::Name>::type_url(),
                    value,
                })),
                ..Default::default()
            }),
    );
    out
}

/// The RBAC network filters for TCP traffic to `proxy` (L4 fields only), DENY then ALLOW.
pub fn network_filters(ctx: &PushContext, scope: &ScopeView) -> Vec<NetworkFilter> {
    network_filters_for(ctx, scope, None, false)
}

/// [`network_filters`] for a waypoint's chain of `served`'s traffic, or (`tunnel`) for what a
/// sidecar takes over HBONE.
pub fn network_filters_for(
    ctx: &PushContext,
    scope: &ScopeView,
    served: Option<&Service>,
    tunnel: bool,
) -> Vec<NetworkFilter> {
    let rules = rules_for(ctx, scope, true, served, tunnel);
    let mut out = super::extauthz::network_filters(ctx, &rules.custom, rules.custom_provider());
    out.extend(
        rbac_configs(&rules, Layer::Network)
            .into_iter()
            .map(|value| {
                let type_url = <NetworkRbac as prost::Name>::type_url();
                NetworkFilter::encoded(NETWORK_RBAC_FILTER, TypedConfig(Any { type_url, value }))
            }),
    );
    out
}

/// The encoded RBAC configs, one per action in istiod's order (AUDIT on HTTP only, DENY, ALLOW),
/// each with its enforced and dry-run rules; an action with neither gets no filter.
fn rbac_configs(rules: &Rules, layer: Layer) -> Vec<Vec<u8>> {
    let audit = (layer == Layer::Http).then_some((
        rbac::Action::Log,
        Some(&rules.audit).filter(|a| !a.is_empty()),
        None,
    ));
    audit
        .into_iter()
        .chain([
            (
                rbac::Action::Deny,
                Some(&rules.deny).filter(|d| !d.is_empty()),
                Some(&rules.dry_deny).filter(|d| !d.is_empty()),
            ),
            (
                rbac::Action::Allow,
                rules.any_allow.then_some(&rules.allow),
                rules.any_dry_allow.then_some(&rules.dry_allow),
            ),
        ])
        .filter(|(_, enforced, shadow)| enforced.is_some() || shadow.is_some())
        .map(|(action, enforced, shadow)| encoded(action, enforced, shadow, layer))
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Layer {
    Http,
    Network,
}

/// An HTTP or network RBAC filter config. `rules` and `shadow_rules` are fields 1 and 2 in both;
/// the shadow rules' stat prefix is field 3 in HTTP RBAC and 5 in network RBAC, where field 3 is
/// the required `stat_prefix`. Without `rules` the filter enforces nothing (only dry-run policies).
fn encoded(
    action: rbac::Action,
    enforced: Option<&BTreeMap<String, Policy>>,
    shadow: Option<&BTreeMap<String, Policy>>,
    layer: Layer,
) -> Vec<u8> {
    let mut value = Vec::new();
    if let Some(policies) = enforced {
        put_field(1, &rbac_bytes(action, policies), &mut value);
    }
    if let Some(policies) = shadow {
        put_field(2, &rbac_bytes(action, policies), &mut value);
        // istiod's prefixes, so dashboards and log queries for dry-run results carry over.
        let prefix = if action == rbac::Action::Deny {
            "istio_dry_run_deny_"
        } else {
            "istio_dry_run_allow_"
        };
        let tag = if layer == Layer::Http { 3 } else { 5 };
        put_field(tag, prefix.as_bytes(), &mut value);
    }
    if layer == Layer::Network {
        put_field(3, b"tcp.", &mut value);
    }
    value
}

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
fn permission_for<'a>(
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
fn with_trust_domains(rule: &Rule, trust_domains: &[&str]) -> Rule {
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
fn principal_for<'a>(
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

//! AuthorizationPolicy → Envoy RBAC HTTP filters, on the server side of a proxy (gateway listeners and
//! sidecar inbound): one DENY filter, then one ALLOW filter, as istiod orders them. A request is
//! denied when any DENY policy matches, or when ALLOW policies exist and none matches.

use super::rbac::{from_tunnel_peer, http_rbac_filter, network_rbac_filter, rbac_bytes};
use super::rules::{permission_for, principal_for, with_trust_domains};
use crate::config::security::{AuthorizationAction, AuthorizationPolicy, Rule};
use crate::config::security::{is_dry_run, when_key_expressible};
use crate::config::{Kind, Spec};
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::put_field;
use crate::xds::generate::typed_listener::NetworkFilter;
use envoy_types::pb::envoy::config::rbac::v3::{Policy, rbac};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use std::collections::BTreeMap;
use tracing::warn;

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
            .map(http_rbac_filter),
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
            .map(network_rbac_filter),
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

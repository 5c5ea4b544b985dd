//! RDS: VirtualService HTTP routes translated into Envoy routes, per service and port.

use super::util::{duration, fraction, outbound_cluster, string_matcher};
use crate::config::Config;
use crate::config::common::StringMatch;
use crate::config::networking::Resolution;
use crate::config::networking::{
    ConsistentHashLb, Destination, HeaderOperations, Headers, HttpMatchRequest, HttpRoute,
    RedirectPortSelection, TrafficPolicy,
};
use crate::model::origin::Origin;
use crate::model::{Service, resolve_host};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, HeaderValue, HeaderValueOption, RuntimeFractionalPercent, data_source,
    header_value_option::HeaderAppendAction,
};
use envoy_types::pb::envoy::config::route::v3::route_action::{
    self, ClusterSpecifier, HashPolicy, HostRewriteSpecifier, RequestMirrorPolicy, hash_policy,
};
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::{self, ClusterWeight};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, RedirectAction, RetryPolicy, Route, RouteAction, RouteMatch, VirtualHost,
    WeightedCluster, redirect_action, retry_policy::RetryHostPredicate, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{FaultDelay, fault_delay};
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    FaultAbort, HttpFault, fault_abort,
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatchAndSubstitute, RegexMatcher};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};

pub const FAULT_FILTER: &str = "envoy.filters.http.fault";
pub const CORS_FILTER: &str = "envoy.filters.http.cors";

/// Virtual host for one service port, with domains a client may use to reach it.
pub fn virtual_host(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    grpc: bool,
    seen: &mut std::collections::HashSet<String>,
) -> Option<VirtualHost> {
    let mut domains = Vec::new();
    let mut add = |d: String| {
        if seen.insert(d.clone()) {
            domains.push(d);
        }
    };
    add(svc.hostname.clone());
    add(format!("{}:{port}", svc.hostname));
    let svc_suffix = format!(".{}.svc.{}", svc.namespace, ctx.mesh.domain_suffix);
    if !grpc && let Some(short) = svc.hostname.strip_suffix(&svc_suffix) {
        for d in [
            format!("{short}.{}", svc.namespace),
            format!("{short}.{}.svc", svc.namespace),
        ] {
            add(format!("{d}:{port}"));
            add(d);
        }
        if svc.namespace == scope.namespace {
            add(format!("{short}:{port}"));
            add(short.to_string());
        }
    }
    // A headless Kubernetes Service (a StatefulSet's): its pods are reached by their own names
    // (`kafka-0.kafka.ns.svc…`), so every domain also matches one label more, as istiod's, and
    // the original-destination cluster takes the pod the name resolved to.
    if svc.resolution == Resolution::NONE && svc.origin().0 == "Service" {
        let wildcards: Vec<String> = domains.iter().map(|d| format!("*.{d}")).collect();
        for d in wildcards {
            if seen.insert(d.clone()) {
                domains.push(d);
            }
        }
    }
    if domains.is_empty() {
        return None;
    }
    Some(VirtualHost {
        name: format!("{}:{port}", svc.hostname),
        domains,
        routes: routes(ctx, scope, svc, port, grpc),
        ..Default::default()
    })
}

/// Routes for one service port: its VirtualService's HTTP routes, or a default route to the service.
pub fn routes(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    grpc: bool,
) -> Vec<Route> {
    let Some(vs) = ctx.virtual_service_for(&scope.namespace, &svc.hostname) else {
        return vec![default_route(ctx, scope, svc, port, grpc)];
    };
    virtual_service_routes(
        ctx,
        scope,
        (&vs.config, &vs.origin),
        &vs.spec.http,
        port,
        grpc,
        &|m| match_applies(m, scope, port),
    )
}

/// A VirtualService's HTTP routes in order, each match the generator keeps (`applies`: port,
/// source, gateway) one Envoy route; a route without matches takes everything, so it ends the list.
#[allow(clippy::too_many_arguments)]
pub(in crate::xds::generate) fn virtual_service_routes(
    ctx: &PushContext,
    scope: &ScopeView,
    (vs, origin): (&Config, &Origin),
    http_routes: &[HttpRoute],
    port: u32,
    grpc: bool,
    applies: &dyn Fn(&HttpMatchRequest) -> bool,
) -> Vec<Route> {
    let vs_ns = vs.metadata.namespace.as_str();
    // Derived from the Gateway API: its semantics (istiod's `UseGatewaySemantics`); from an
    // Ingress: its path prefixes (`UseIngressSemantics`).
    let semantics = Semantics {
        api: origin.gateway_api(),
        segments: origin.segment_prefixes(),
    };
    let mut out = Vec::new();
    for (i, http) in http_routes.iter().enumerate() {
        let name = if http.name.is_empty() {
            format!("{}.{vs_ns}.{i}", vs.metadata.name)
        } else {
            http.name.clone()
        };
        let matches: Vec<Option<&HttpMatchRequest>> = if http.matches.is_empty() {
            vec![None]
        } else {
            http.matches
                .iter()
                .filter(|m| applies(m))
                .map(Some)
                .collect()
        };
        for m in matches {
            out.push(route(
                ctx, scope, port, vs_ns, http, m, &name, grpc, semantics,
            ));
        }
        if http.matches.is_empty() {
            break;
        }
    }
    out
}

/// Conditions decided when generating (not by Envoy per request): port, source labels, namespace, gateway.
fn match_applies(m: &HttpMatchRequest, scope: &ScopeView, port: u32) -> bool {
    super::util::match_applies_to_sidecar(
        scope,
        port,
        m.port,
        &m.source_labels,
        &m.gateways,
        &m.source_namespace,
    )
}

fn default_route(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    grpc: bool,
) -> Route {
    let cluster = outbound_cluster(port, "", &svc.hostname);
    let mut action = RouteAction {
        cluster_specifier: Some(ClusterSpecifier::Cluster(cluster)),
        ..Default::default()
    };
    action.hash_policy = hash_for_service(ctx, scope, svc, port)
        .into_iter()
        .collect();
    let hashed = !action.hash_policy.is_empty();
    finish_action(&mut action, None, grpc, hashed);
    Route {
        name: "default".into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(route::Action::Route(action)),
        ..Default::default()
    }
}

/// Istio's route timeout default is "disabled"; retries default to 2 attempts on connection failures.
/// `hashed`: the route hashes to one host (a single destination with a consistent hash), so a
/// retry may go back to it.
fn finish_action(action: &mut RouteAction, http: Option<&HttpRoute>, grpc: bool, hashed: bool) {
    let timeout = http
        .and_then(|h| h.timeout)
        .map_or(std::time::Duration::ZERO, |d| d.as_std());
    if grpc {
        action.max_stream_duration = Some(
            envoy_types::pb::envoy::config::route::v3::route_action::MaxStreamDuration {
                max_stream_duration: (!timeout.is_zero()).then(|| duration(timeout)),
                grpc_timeout_header_max: (!timeout.is_zero()).then(|| duration(timeout)),
                ..Default::default()
            },
        );
    } else {
        action.timeout = Some(duration(timeout));
    }
    action.retry_policy = retry_policy(http.and_then(|h| h.retries.as_ref()), grpc, hashed);
}

/// istiod's retry policy: 2 attempts on connect failures, refused streams, `unavailable` and
/// `cancelled` (status codes only where `retryOn` lists them); another host each attempt unless the
/// route hashes to a host (`hashed`) or `retryIgnorePreviousHosts: false`.
fn retry_policy(
    retries: Option<&crate::config::networking::HttpRetry>,
    grpc: bool,
    hashed: bool,
) -> Option<RetryPolicy> {
    if retries.is_some_and(|r| r.attempts <= 0) {
        return None;
    }
    let attempts = retries.map_or(2, |r| r.attempts as u32);
    let default_on = if grpc {
        "unavailable,cancelled"
    } else {
        "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
    };
    let on = retries
        .map(|r| r.retry_on.as_str())
        .filter(|s| !s.is_empty())
        .unwrap_or(default_on);
    let (codes, policies): (Vec<&str>, Vec<&str>) = on
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .partition(|p| p.parse::<u32>().is_ok());
    let mut retry_on = policies.join(",");
    let status_codes: Vec<u32> = codes.iter().filter_map(|c| c.parse().ok()).collect();
    if !status_codes.is_empty() && !retry_on.contains("retriable-status-codes") {
        retry_on = if retry_on.is_empty() {
            "retriable-status-codes".into()
        } else {
            format!("{retry_on},retriable-status-codes")
        };
    }
    let mut policy = RetryPolicy {
        retry_on,
        num_retries: Some(UInt32Value { value: attempts }),
        per_try_timeout: retries
            .and_then(|r| r.per_try_timeout)
            .map(|d| duration(d.as_std())),
        retriable_status_codes: if grpc { vec![] } else { status_codes },
        retry_back_off: retries.and_then(|r| r.backoff).map(|d| {
            envoy_types::pb::envoy::config::route::v3::retry_policy::RetryBackOff {
                base_interval: Some(duration(d.as_std())),
                ..Default::default()
            }
        }),
        ..Default::default()
    };
    if grpc {
        return Some(policy);
    }
    policy.host_selection_retry_max_attempts = 5;
    let other_hosts = retries
        .and_then(|r| r.retry_ignore_previous_hosts)
        .unwrap_or(!hashed);
    if other_hosts {
        policy.retry_host_predicate = vec![RetryHostPredicate {
            name: "envoy.retry_host_predicates.previous_hosts".into(),
            config_type: Some(envoy_types::pb::envoy::config::route::v3::retry_policy::retry_host_predicate::ConfigType::TypedConfig(
                any(&PreviousHostsPredicate {}),
            )),
        }];
    }
    if retries.and_then(|r| r.retry_remote_localities) == Some(true) {
        policy.retry_priority = Some(
            envoy_types::pb::envoy::config::route::v3::retry_policy::RetryPriority {
                name: "envoy.retry_priorities.previous_priorities".into(),
                config_type: Some(
                    envoy_types::pb::envoy::config::route::v3::retry_policy::retry_priority::ConfigType::TypedConfig(any(
                        &envoy_types::pb::envoy::extensions::retry::priority::previous_priorities::v3::PreviousPrioritiesConfig {
                            update_frequency: 2,
                        },
                    )),
                ),
            },
        );
    }
    Some(policy)
}

/// A VirtualService `corsPolicy` as istiod translates it: Envoy's CORS filter answers preflights
/// that match, and forwards the others unless `unmatchedPreflights: IGNORE`.
fn cors_policy(
    c: &crate::config::networking::CorsPolicy,
) -> envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy {
    use crate::config::networking::UnmatchedPreflights;
    let origins = if !c.allow_origins.is_empty() {
        c.allow_origins
            .iter()
            .filter_map(|m| string_matcher(m, false))
            .collect()
    } else {
        c.allow_origin
            .iter()
            .filter_map(|o| string_matcher(&StringMatch::Exact(o.clone()), false))
            .collect()
    };
    envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy {
        allow_origin_string_match: origins,
        allow_methods: c.allow_methods.join(","),
        allow_headers: c.allow_headers.join(","),
        expose_headers: c.expose_headers.join(","),
        max_age: c
            .max_age
            .map(|d| d.as_std().as_secs().to_string())
            .unwrap_or_default(),
        allow_credentials: c.allow_credentials.map(|value| BoolValue { value }),
        filter_enabled: Some(RuntimeFractionalPercent {
            default_value: Some(envoy_types::pb::envoy::r#type::v3::FractionalPercent {
                numerator: 100,
                denominator: 0,
            }),
            ..Default::default()
        }),
        forward_not_matching_preflights: Some(BoolValue {
            value: c.unmatched_preflights != Some(UnmatchedPreflights::IGNORE),
        }),
        ..Default::default()
    }
}

fn cluster_for(
    dest: &Destination,
    vs_ns: &str,
    suffix: &str,
    port: u32,
    ctx: &PushContext,
) -> String {
    let host = resolve_host(&dest.host, vs_ns, suffix);
    let dest_port = dest
        .port
        .as_ref()
        .map(|p| p.number)
        .filter(|p| *p != 0)
        .unwrap_or_else(|| match ctx.registry.services.get(&host) {
            Some(svc) if svc.ports.len() == 1 => svc.ports[0].number,
            _ => port,
        });
    outbound_cluster(dest_port, &dest.subset, &host)
}

/// Header changes as istiod translates them (`TranslateHeadersOperations`): `set` then `add`,
/// each sorted by name; `:authority` or `host` (in `set`, else in `add`) becomes a host rewrite,
/// and pseudo-headers and `host` are never added or removed as headers (Envoy refuses them).
#[derive(Default)]
struct HeaderOps {
    request_add: Vec<HeaderValueOption>,
    request_remove: Vec<String>,
    response_add: Vec<HeaderValueOption>,
    response_remove: Vec<String>,
    authority: String,
}

fn is_internal_header(name: &str) -> bool {
    name.starts_with(':') || name.eq_ignore_ascii_case("host")
}

fn is_authority_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")
}

/// The options of `headers` (`append`: add to a value already there, else overwrite it) and the
/// authority among them.
fn append_options(
    headers: &std::collections::BTreeMap<String, String>,
    append: bool,
) -> (Vec<HeaderValueOption>, String) {
    let action = if append {
        HeaderAppendAction::AppendIfExistsOrAdd
    } else {
        HeaderAppendAction::OverwriteIfExistsOrAdd
    };
    let mut authority = String::new();
    let options = headers
        .iter()
        .filter(|(k, v)| {
            if is_authority_header(k) {
                authority = v.to_string();
            }
            !is_internal_header(k)
        })
        .map(|(k, v)| HeaderValueOption {
            header: Some(HeaderValue {
                key: k.clone(),
                value: v.clone(),
                ..Default::default()
            }),
            append_action: action as i32,
            ..Default::default()
        })
        .collect();
    (options, authority)
}

impl HeaderOps {
    fn of(headers: Option<&Headers>) -> HeaderOps {
        let Some(h) = headers else {
            return HeaderOps::default();
        };
        let empty = HeaderOperations::default();
        let (req, resp) = (
            h.request.as_ref().unwrap_or(&empty),
            h.response.as_ref().unwrap_or(&empty),
        );
        let (mut request_add, set_authority) = append_options(&req.set, false);
        let (added, add_authority) = append_options(&req.add, true);
        request_add.extend(added);
        let (mut response_add, _) = append_options(&resp.set, false);
        response_add.extend(append_options(&resp.add, true).0);
        let keep = |names: &[String]| -> Vec<String> {
            names
                .iter()
                .filter(|n| !is_internal_header(n))
                .cloned()
                .collect()
        };
        HeaderOps {
            request_add,
            request_remove: keep(&req.remove),
            response_add,
            response_remove: keep(&resp.remove),
            authority: if set_authority.is_empty() {
                add_authority
            } else {
                set_authority
            },
        }
    }
}

/// The consistent hash of a destination as istiod finds it (`HashForHTTPDestination`): the
/// subset's port-level setting, else the subset's, else the rule's port-level setting for the
/// destination's port, else the rule's.
fn hash_for_destination(
    ctx: &PushContext,
    scope: &ScopeView,
    dest: &Destination,
    vs_ns: &str,
) -> Option<HashPolicy> {
    let host = resolve_host(&dest.host, vs_ns, &ctx.mesh.domain_suffix);
    let svc = ctx.registry.services.get(&host)?;
    let rule = &ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)?
        .spec;
    let at_port = |policy| port_hash(policy, dest.port.as_ref().map(|p| p.number));
    let top = rule.traffic_policy.as_ref();
    let subset = rule
        .subsets
        .iter()
        .find(|s| s.name == dest.subset)
        .and_then(|s| s.traffic_policy.as_ref());
    at_port(subset)
        .or_else(|| subset.and_then(consistent_hash))
        .or_else(|| at_port(top))
        .or_else(|| top.and_then(consistent_hash))
        .and_then(hash_policy)
}

/// The consistent hash of a service's port without a VirtualService (`hashForService`): the
/// rule's port-level setting for the port, else the rule's.
fn hash_for_service(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
) -> Option<HashPolicy> {
    let top = ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)?
        .spec
        .traffic_policy
        .as_ref()?;
    port_hash(Some(top), Some(port))
        .or_else(|| consistent_hash(top))
        .and_then(hash_policy)
}

/// A policy's port-level consistent hash for `port`.
fn port_hash(policy: Option<&TrafficPolicy>, port: Option<u32>) -> Option<&ConsistentHashLb> {
    let port = port?;
    policy?
        .port_level_settings
        .iter()
        .find(|s| s.port.as_ref().map(|p| p.number) == Some(port))?
        .load_balancer
        .as_ref()?
        .consistent_hash
        .as_ref()
}

fn consistent_hash(policy: &TrafficPolicy) -> Option<&ConsistentHashLb> {
    policy.load_balancer.as_ref()?.consistent_hash.as_ref()
}

/// istiod's `consistentHashToHashPolicy`.
fn hash_policy(ch: &ConsistentHashLb) -> Option<HashPolicy> {
    let policy = if let Some(h) = &ch.http_header_name {
        hash_policy::PolicySpecifier::Header(hash_policy::Header {
            header_name: h.clone(),
            ..Default::default()
        })
    } else if let Some(c) = &ch.http_cookie {
        hash_policy::PolicySpecifier::Cookie(hash_policy::Cookie {
            name: c.name.clone(),
            path: c.path.clone(),
            ttl: c.ttl.map(|d| duration(d.as_std())),
            attributes: c
                .attributes
                .iter()
                .map(|a| hash_policy::CookieAttribute {
                    name: a.name.clone(),
                    value: a.value.clone(),
                })
                .collect(),
        })
    } else if ch.use_source_ip == Some(true) {
        hash_policy::PolicySpecifier::ConnectionProperties(hash_policy::ConnectionProperties {
            source_ip: true,
        })
    } else {
        hash_policy::PolicySpecifier::QueryParameter(hash_policy::QueryParameter {
            name: ch.http_query_parameter_name.clone()?,
        })
    };
    Some(HashPolicy {
        policy_specifier: Some(policy),
        ..Default::default()
    })
}

#[allow(clippy::too_many_arguments)]
/// One Envoy route for an HTTP route of a VirtualService.
fn route(
    ctx: &PushContext,
    scope: &ScopeView,
    port: u32,
    vs_ns: &str,
    http: &HttpRoute,
    m: Option<&HttpMatchRequest>,
    name: &str,
    grpc: bool,
    semantics: Semantics,
) -> Route {
    let api = semantics.api;
    let ops = HeaderOps::of(http.headers.as_ref());
    let authority = ops.authority;
    let mut r = Route {
        name: name.to_string(),
        r#match: Some(super::route_match::route_match(m, semantics.segments)),
        // Envoy's per-route statistics (`vhost.<vhost>.route.<prefix>.*`), as istiod sets it.
        stat_prefix: m.map(|m| m.stat_prefix.clone()).unwrap_or_default(),
        request_headers_to_add: ops.request_add,
        request_headers_to_remove: ops.request_remove,
        response_headers_to_add: ops.response_add,
        response_headers_to_remove: ops.response_remove,
        ..Default::default()
    };
    r.action = Some(if let Some(redirect) = &http.redirect {
        route::Action::Redirect(redirect_action(redirect, port, api))
    } else if let Some(dr) = &http.direct_response {
        route::Action::DirectResponse(direct_response(dr))
    } else {
        route::Action::Route(route_action(
            (ctx, scope),
            (port, vs_ns),
            http,
            &mut r,
            authority,
            grpc,
            api,
        ))
    });
    if let Some(fault) = &http.fault {
        r.typed_per_filter_config
            .insert(FAULT_FILTER.into(), any(&http_fault(fault)));
    }
    if let Some(cors) = &http.cors_policy {
        r.typed_per_filter_config
            .insert(CORS_FILTER.into(), any(&cors_policy(cors)));
    }
    r
}

/// A VirtualService `redirect` as istiod writes it: a Gateway API prefix redirect, the port
/// asked for or derived (none written for http:80 and https:443), the status code.
fn redirect_action(
    redirect: &crate::config::networking::HttpRedirect,
    port: u32,
    api: bool,
) -> RedirectAction {
    let mut ra = RedirectAction {
        host_redirect: redirect.authority.clone(),
        scheme_rewrite_specifier: (!redirect.scheme.is_empty()).then(|| {
            redirect_action::SchemeRewriteSpecifier::SchemeRedirect(redirect.scheme.clone())
        }),
        response_code: match redirect.redirect_code {
            302 => redirect_action::RedirectResponseCode::Found,
            303 => redirect_action::RedirectResponseCode::SeeOther,
            307 => redirect_action::RedirectResponseCode::TemporaryRedirect,
            308 => redirect_action::RedirectResponseCode::PermanentRedirect,
            _ => redirect_action::RedirectResponseCode::MovedPermanently,
        } as i32,
        ..Default::default()
    };
    if let Some(prefix) = redirect
        .uri
        .strip_prefix(crate::model::gateway_api::PREFIX_MARK)
        .filter(|_| api)
    {
        ra.path_rewrite_specifier = Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(
            prefix.to_string(),
        ));
    } else if !redirect.uri.is_empty() {
        ra.path_rewrite_specifier = Some(redirect_action::PathRewriteSpecifier::PathRedirect(
            redirect.uri.clone(),
        ));
    }
    let asked = if let Some(p) = redirect.port {
        Some(p)
    } else {
        match redirect.derive_port {
            Some(RedirectPortSelection::FROM_REQUEST_PORT) => Some(port),
            Some(RedirectPortSelection::FROM_PROTOCOL_DEFAULT) => Some(0),
            None => None,
        }
    };
    if let Some(p) = asked {
        // As istiod: no explicit :80 for http or :443 for https.
        let scheme = match redirect.scheme.as_str() {
            "" if port == 443 => "https",
            "" => "http",
            s => s,
        };
        ra.port_redirect = match (p, scheme) {
            (80, "http") | (443, "https") => 0,
            _ => p,
        };
    }
    ra
}

fn direct_response(dr: &crate::config::networking::HttpDirectResponse) -> DirectResponseAction {
    DirectResponseAction {
        status: dr.status,
        body: dr.body.as_ref().map(|b| DataSource {
            specifier: Some(match b {
                crate::config::networking::HttpBody::String(s) => {
                    data_source::Specifier::InlineString(s.clone())
                }
                crate::config::networking::HttpBody::Bytes(s) => {
                    data_source::Specifier::InlineString(s.clone())
                }
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where a route sends: its rewrites, its destination (one cluster, or weighted clusters with
/// their header changes), hashing, mirrors and the route's timeouts and retries. A single
/// destination's header changes join the route's `r`.
fn route_action(
    (ctx, scope): (&PushContext, &ScopeView),
    (port, vs_ns): (u32, &str),
    http: &HttpRoute,
    r: &mut Route,
    mut authority: String,
    grpc: bool,
    api: bool,
) -> RouteAction {
    let suffix = ctx.mesh.domain_suffix.as_str();
    let dests: Vec<_> = http
        .route
        .iter()
        .filter(|d| d.destination.is_some())
        .collect();
    let mut action = RouteAction::default();
    if let Some(rw) = &http.rewrite {
        let separated_prefix = r.r#match.as_ref().and_then(|m| match &m.path_specifier {
            Some(route_match::PathSpecifier::PathSeparatedPrefix(p)) => Some(p.clone()),
            _ => None,
        });
        match separated_prefix {
            // Gateway API: replacing the prefix with `/` removes it, keeping one `/`.
            Some(prefix) if api && rw.uri == "/" => {
                action.regex_rewrite = Some(RegexMatchAndSubstitute {
                    pattern: Some(RegexMatcher {
                        regex: format!(
                            "^{}(/?)(.*)",
                            crate::model::gateway_api::quote_meta(&prefix)
                        ),
                        ..Default::default()
                    }),
                    substitution: r"/\2".into(),
                });
            }
            _ if !rw.uri.is_empty() => action.prefix_rewrite = rw.uri.clone(),
            _ => {}
        }
        if let Some(rr) = &rw.uri_regex_rewrite {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(RegexMatcher {
                    regex: rr.match_regex.clone(),
                    ..Default::default()
                }),
                substitution: rr.rewrite.clone(),
            });
        }
        if !rw.authority.is_empty() {
            authority = rw.authority.clone();
        }
    }
    if !authority.is_empty() {
        action.host_rewrite_specifier = Some(HostRewriteSpecifier::HostRewriteLiteral(authority));
    }
    let single = dests.len() == 1
        || dests.iter().filter(|d| d.weight > 0).count() <= 1
            && dests.iter().all(|d| d.weight == 0);
    let mut hashed = false;
    if single && let Some(d) = dests.first() {
        let dest = d
            .destination
            .as_ref()
            .unwrap_or(&Destination::default())
            .clone();
        action.cluster_specifier = Some(ClusterSpecifier::Cluster(cluster_for(
            &dest, vs_ns, suffix, port, ctx,
        )));
        // A single destination's header changes join the route's; its authority applies
        // when the route does not rewrite the host itself.
        let ops = HeaderOps::of(d.headers.as_ref());
        r.request_headers_to_add.extend(ops.request_add);
        r.request_headers_to_remove.extend(ops.request_remove);
        r.response_headers_to_add.extend(ops.response_add);
        r.response_headers_to_remove.extend(ops.response_remove);
        if !ops.authority.is_empty() && action.host_rewrite_specifier.is_none() {
            action.host_rewrite_specifier =
                Some(HostRewriteSpecifier::HostRewriteLiteral(ops.authority));
        }
        if let Some(hash) = hash_for_destination(ctx, scope, &dest, vs_ns) {
            action.hash_policy.push(hash);
            hashed = true;
        }
    } else {
        let mut clusters = Vec::new();
        for d in dests.iter().filter(|d| d.weight > 0) {
            let Some(dest) = d.destination.as_ref() else {
                continue;
            };
            let ops = HeaderOps::of(d.headers.as_ref());
            clusters.push(ClusterWeight {
                name: cluster_for(dest, vs_ns, suffix, port, ctx),
                weight: Some(UInt32Value {
                    value: d.weight as u32,
                }),
                request_headers_to_add: ops.request_add,
                request_headers_to_remove: ops.request_remove,
                response_headers_to_add: ops.response_add,
                response_headers_to_remove: ops.response_remove,
                host_rewrite_specifier: (!ops.authority.is_empty()).then_some(
                    weighted_cluster::cluster_weight::HostRewriteSpecifier::HostRewriteLiteral(
                        ops.authority,
                    ),
                ),
                ..Default::default()
            });
            action
                .hash_policy
                .extend(hash_for_destination(ctx, scope, dest, vs_ns));
        }
        action.cluster_specifier = Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters,
            ..Default::default()
        }));
    }
    let mirrors = http
        .mirror
        .iter()
        .map(|d| {
            (
                d,
                http.mirror_percentage
                    .map(|p| p.value)
                    .or(http.mirror_percent.map(f64::from)),
            )
        })
        .chain(
            http.mirrors
                .iter()
                .filter_map(|m| Some((m.destination.as_ref()?, m.percentage.map(|p| p.value)))),
        );
    action.request_mirror_policies = mirrors
        .map(|(d, pct)| RequestMirrorPolicy {
            cluster: cluster_for(d, vs_ns, suffix, port, ctx),
            runtime_fraction: Some(RuntimeFractionalPercent {
                default_value: Some(fraction(pct.unwrap_or(100.0))),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    finish_action(&mut action, Some(http), grpc, hashed);
    if api {
        // A backend that does not exist answers 500 (the Gateway API's rule).
        action.cluster_not_found_response_code =
            route_action::ClusterNotFoundResponseCode::InternalServerError as i32;
    }
    action
}

/// Which of istiod's derived-config semantics a route takes.
#[derive(Clone, Copy)]
struct Semantics {
    /// The Gateway API's (500 for a missing backend, prefix redirects and rewrites).
    api: bool,
    /// Prefixes match whole path segments (the Gateway API's and Ingress's).
    segments: bool,
}

fn http_fault(f: &crate::config::networking::HttpFaultInjection) -> HttpFault {
    let mut out = HttpFault::default();
    if let Some(d) = &f.delay {
        let pct = d.percentage.map(|p| p.value).unwrap_or(if d.percent > 0 {
            f64::from(d.percent)
        } else {
            100.0
        });
        out.delay = Some(FaultDelay {
            fault_delay_secifier: d
                .fixed_delay
                .map(|fd| fault_delay::FaultDelaySecifier::FixedDelay(duration(fd.as_std()))),
            percentage: Some(fraction(pct)),
        });
    }
    if let Some(a) = &f.abort {
        let pct = a.percentage.map_or(100.0, |p| p.value);
        let error_type = if let Some(status) = a.http_status {
            Some(fault_abort::ErrorType::HttpStatus(status as u32))
        } else {
            a.grpc_status
                .as_ref()
                .and_then(|g| grpc_code(g))
                .map(fault_abort::ErrorType::GrpcStatus)
        };
        out.abort = Some(FaultAbort {
            error_type,
            percentage: Some(fraction(pct)),
            ..Default::default()
        });
    }
    out
}

/// gRPC status names (as Istio accepts them) to codes.
fn grpc_code(name: &str) -> Option<u32> {
    crate::config::networking::GRPC_STATUS_NAMES
        .iter()
        .position(|c| *c == name)
        .map(|p| p as u32)
        .or_else(|| name.parse().ok())
}

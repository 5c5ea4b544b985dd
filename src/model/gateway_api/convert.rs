//! Route rules into Istio routes, as istiod converts them (`convertHTTPRoute`,
//! `convertGRPCRoute`, `buildDestination`, the filter constructors), and the spec's precedence
//! among the rules of one hostname (`sortHTTPRoutes`).

use super::outcome::Reference;
use super::parents::Grants;
use crate::config::Config;
use crate::config::Spec;
use crate::config::common::{Duration, StringMatch, parse_go_duration};
use crate::config::gateway_api::{
    self as api, BackendRef, FilterType, HttpBackendRef, HttpHeaderFilter, HttpHeaderMatch,
    HttpRouteFilter,
};
use crate::config::networking::{
    self as istio, CorsPolicy, Destination, HeaderOperations, Headers, HttpDirectResponse,
    HttpMatchRequest, HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRewrite, HttpRouteDestination,
    Percent, PortSelector, RedirectPortSelection, RegexRewrite, RouteDestination,
    UnmatchedPreflights,
};
use std::collections::BTreeMap;

/// A rule problem, as istiod's `ConfigError`: reported in the route's ResolvedRefs condition.
#[derive(Debug, Clone)]
pub(super) struct RuleError {
    pub(super) reason: &'static str,
    pub(super) message: String,
}

impl RuleError {
    pub(super) fn new(reason: &'static str, message: impl Into<String>) -> RuleError {
        RuleError {
            reason,
            message: message.into(),
        }
    }

    /// A backend problem drops that backend only; others fail the rule.
    pub(super) fn drops_backend_only(&self) -> bool {
        matches!(
            self.reason,
            "RefNotPermitted" | "BackendNotFound" | "InvalidKind"
        )
    }
}

/// What one route's rules convert to, for Gateway or mesh parents.
#[derive(Default)]
pub(super) struct Converted {
    pub(super) http: Vec<istio::HttpRoute>,
    pub(super) tcp: Vec<istio::TcpRoute>,
    pub(super) tls: Vec<istio::TlsRoute>,
    pub(super) error: Option<RuleError>,
}

/// Converts a route's rules (for Gateway parents, with ReferenceGrants enforced, or for mesh
/// parents); the backends it names are added to `backends` for the status to resolve.
pub(super) fn convert(
    config: &Config,
    suffix: &str,
    grants: &Grants,
    gateway: bool,
    backends: &mut Vec<Reference>,
) -> Converted {
    let mut ctx = Ctx {
        config,
        suffix,
        grants,
        enforce_grants: gateway,
        backends,
        backend_error: None,
    };
    let mut out = Converted::default();
    let result: Result<(), RuleError> = match &config.spec {
        Spec::HTTPRoute(r) => r.rules.iter().enumerate().try_for_each(|(i, rule)| {
            let matches: Vec<Option<&api::HttpRouteMatch>> = if rule.matches.is_empty() {
                vec![None]
            } else {
                rule.matches.iter().map(Some).collect()
            };
            for m in matches {
                out.http.push(ctx.http_rule(rule, m, i)?);
            }
            Ok(())
        }),
        Spec::GRPCRoute(r) => r.rules.iter().enumerate().try_for_each(|(i, rule)| {
            let matches: Vec<Option<&api::GrpcRouteMatch>> = if rule.matches.is_empty() {
                vec![None]
            } else {
                rule.matches.iter().map(Some).collect()
            };
            for m in matches {
                out.http.push(ctx.grpc_rule(rule, m, i)?);
            }
            Ok(())
        }),
        Spec::TCPRoute(r) => r.rules.iter().try_for_each(|rule| {
            out.tcp.push(istio::TcpRoute {
                matches: Vec::new(),
                route: ctx.l4_destinations(&rule.backend_refs)?,
            });
            Ok(())
        }),
        Spec::TLSRoute(r) => r.rules.iter().try_for_each(|rule| {
            let sni = if r.hostnames.is_empty() {
                vec!["*".to_string()]
            } else {
                r.hostnames.clone()
            };
            out.tls.push(istio::TlsRoute {
                matches: vec![istio::TlsMatchAttributes {
                    sni_hosts: sni,
                    ..Default::default()
                }],
                route: ctx.l4_destinations(&rule.backend_refs)?,
            });
            Ok(())
        }),
        _ => Ok(()),
    };
    match result {
        Ok(()) => out.error = ctx.backend_error,
        Err(e) => {
            out = Converted {
                error: Some(e),
                ..Default::default()
            }
        }
    }
    out
}

struct Ctx<'a> {
    config: &'a Config,
    suffix: &'a str,
    grants: &'a Grants,
    enforce_grants: bool,
    backends: &'a mut Vec<Reference>,
    /// The last backend dropped (the route keeps its other backends).
    backend_error: Option<RuleError>,
}

impl Ctx<'_> {
    fn namespace(&self) -> &str {
        &self.config.metadata.namespace
    }

    fn rule_name(&self, name: &Option<String>, index: usize) -> String {
        name.clone().unwrap_or_else(|| {
            format!(
                "{}.{}.{index}",
                self.config.metadata.namespace, self.config.metadata.name
            )
        })
    }

    fn http_rule(
        &mut self,
        rule: &api::HttpRouteRule,
        m: Option<&api::HttpRouteMatch>,
        index: usize,
    ) -> Result<istio::HttpRoute, RuleError> {
        let mut r = istio::HttpRoute {
            name: self.rule_name(&rule.name, index),
            ..Default::default()
        };
        if let Some(m) = m {
            r.matches.push(HttpMatchRequest {
                uri: Some(uri_match(m.path.as_ref())?),
                headers: header_matches(&m.headers)?,
                query_params: header_matches(&m.query_params)?,
                method: m.method.clone().map(StringMatch::Exact),
                ..Default::default()
            });
        }
        for f in &rule.filters {
            self.filter(&mut r, f, true)?;
        }
        if let Some(retry) = &rule.retry {
            let mut on = vec![
                "connect-failure".to_string(),
                "refused-stream".into(),
                "unavailable".into(),
                "cancelled".into(),
            ];
            on.extend(retry.codes.iter().map(u32::to_string));
            let attempts = retry.attempts.unwrap_or(2) as i32;
            r.retries = Some(HttpRetry {
                attempts,
                retry_on: if attempts == 0 {
                    String::new()
                } else {
                    on.join(",")
                },
                backoff: retry.backoff.as_deref().and_then(duration),
                ..Default::default()
            });
        }
        if let Some(t) = &rule.timeouts {
            if let Some(d) = t.request.as_deref().and_then(duration) {
                r.timeout = Some(d);
            }
            if let Some(d) = t.backend_request.as_deref().and_then(duration) {
                match &mut r.retries {
                    Some(retries) => retries.per_try_timeout = Some(d),
                    None => r.timeout = Some(d),
                }
            }
        }
        self.http_destinations(&mut r, &rule.backend_refs, true)?;
        Ok(r)
    }

    fn grpc_rule(
        &mut self,
        rule: &api::GrpcRouteRule,
        m: Option<&api::GrpcRouteMatch>,
        index: usize,
    ) -> Result<istio::HttpRoute, RuleError> {
        let mut r = istio::HttpRoute {
            name: self.rule_name(&rule.name, index),
            ..Default::default()
        };
        if let Some(m) = m {
            r.matches.push(HttpMatchRequest {
                uri: grpc_method_match(m.method.as_ref())?,
                headers: header_matches(&m.headers)?,
                ..Default::default()
            });
        }
        for f in &rule.filters {
            self.filter(&mut r, f, false)?;
        }
        self.http_destinations(&mut r, &rule.backend_refs, false)?;
        Ok(r)
    }

    /// One rule filter into the Istio route (istiod's filter switch).
    fn filter(
        &mut self,
        r: &mut istio::HttpRoute,
        f: &HttpRouteFilter,
        http: bool,
    ) -> Result<(), RuleError> {
        match &f.filter_type {
            FilterType::RequestHeaderModifier => {
                if let Some(ops) = header_ops(f.request_header_modifier.as_ref())? {
                    r.headers.get_or_insert_with(Headers::default).request = Some(ops);
                }
            }
            FilterType::ResponseHeaderModifier => {
                if let Some(ops) = header_ops(f.response_header_modifier.as_ref())? {
                    r.headers.get_or_insert_with(Headers::default).response = Some(ops);
                }
            }
            FilterType::RequestRedirect | FilterType::UrlRewrite | FilterType::Cors if !http => {
                return Err(unsupported(&f.filter_type));
            }
            FilterType::RequestRedirect => r.redirect = f.request_redirect.as_ref().map(redirect),
            FilterType::UrlRewrite => r.rewrite = f.url_rewrite.as_ref().and_then(rewrite),
            FilterType::Cors => r.cors_policy = f.cors.as_ref().map(cors),
            FilterType::RequestMirror => {
                if let Some(m) = &f.request_mirror {
                    match self.destination(&m.backend_ref) {
                        Ok(d) => {
                            let percentage = match (&m.fraction, m.percent) {
                                (Some(fr), _) => Some(Percent {
                                    value: 100.0 * f64::from(fr.numerator)
                                        / f64::from(fr.denominator.unwrap_or(100).max(1)),
                                }),
                                (None, Some(p)) => Some(Percent {
                                    value: f64::from(p),
                                }),
                                (None, None) => None,
                            };
                            r.mirrors.push(HttpMirrorPolicy {
                                destination: Some(d),
                                percentage,
                            });
                        }
                        Err(e) if e.drops_backend_only() => self.backend_error = Some(e),
                        Err(e) => return Err(e),
                    }
                }
            }
            FilterType::ExternalAuth | FilterType::ExtensionRef | FilterType::Other(_) => {
                return Err(unsupported(&f.filter_type));
            }
        }
        Ok(())
    }

    /// The rule's backends, or a direct response when none carries weight (404 without
    /// backends, 500 when all weigh zero; gRPC: always 500).
    fn http_destinations(
        &mut self,
        r: &mut istio::HttpRoute,
        refs: &[HttpBackendRef],
        http: bool,
    ) -> Result<(), RuleError> {
        let total: u32 = refs.iter().map(|b| b.weight.unwrap_or(1)).sum();
        if total == 0 && r.redirect.is_none() {
            let status = if http && refs.is_empty() { 404 } else { 500 };
            r.direct_response = Some(HttpDirectResponse { status, body: None });
            return Ok(());
        }
        if r.redirect.is_some() && refs.is_empty() {
            return Ok(());
        }
        let weighted: Vec<&HttpBackendRef> =
            refs.iter().filter(|b| b.weight.unwrap_or(1) > 0).collect();
        let single = weighted.len() == 1;
        for b in weighted {
            let destination = match self.destination(&b.backend()) {
                Ok(d) => d,
                Err(e) if e.drops_backend_only() => {
                    self.backend_error = Some(e);
                    Destination::default()
                }
                Err(e) => return Err(e),
            };
            let mut headers: Option<Headers> = None;
            for f in &b.filters {
                match f.filter_type {
                    FilterType::RequestHeaderModifier => {
                        if let Some(ops) = header_ops(f.request_header_modifier.as_ref())? {
                            headers.get_or_insert_with(Headers::default).request = Some(ops);
                        }
                    }
                    FilterType::ResponseHeaderModifier => {
                        if let Some(ops) = header_ops(f.response_header_modifier.as_ref())? {
                            headers.get_or_insert_with(Headers::default).response = Some(ops);
                        }
                    }
                    FilterType::RequestMirror
                    | FilterType::RequestRedirect
                    | FilterType::UrlRewrite
                    | FilterType::Cors
                    | FilterType::ExternalAuth
                    | FilterType::ExtensionRef
                    | FilterType::Other(_) => return Err(unsupported(&f.filter_type)),
                }
            }
            r.route.push(HttpRouteDestination {
                destination: Some(destination),
                weight: if single {
                    0
                } else {
                    b.weight.unwrap_or(1) as i32
                },
                headers,
            });
        }
        Ok(())
    }

    fn l4_destinations(&mut self, refs: &[BackendRef]) -> Result<Vec<RouteDestination>, RuleError> {
        let weighted: Vec<&BackendRef> =
            refs.iter().filter(|b| b.weight.unwrap_or(1) > 0).collect();
        if weighted.is_empty() {
            // Connections must be refused: a destination that does not exist.
            return Ok(vec![RouteDestination {
                destination: Some(Destination {
                    host: "internal.cluster.local".into(),
                    subset: "zero-weight".into(),
                    port: Some(PortSelector { number: 65535 }),
                }),
                weight: 0,
            }]);
        }
        let single = weighted.len() == 1;
        let mut out = Vec::new();
        for b in weighted {
            let destination = match self.destination(b) {
                Ok(d) => d,
                Err(e) if e.drops_backend_only() => {
                    self.backend_error = Some(e);
                    Destination::default()
                }
                Err(e) => return Err(e),
            };
            out.push(RouteDestination {
                destination: Some(destination),
                weight: if single {
                    0
                } else {
                    b.weight.unwrap_or(1) as i32
                },
            });
        }
        Ok(out)
    }

    /// A backend reference as a destination (istiod's `buildDestination`): a Service
    /// (`name.namespace.svc.<suffix>`), or an Istio `Hostname`; another namespace's only with a
    /// ReferenceGrant (Gateway parents); a port is required.
    fn destination(&mut self, b: &BackendRef) -> Result<Destination, RuleError> {
        let ns = self.namespace().to_string();
        let group = b.group.as_deref().unwrap_or("");
        let kind = b.kind.as_deref().unwrap_or("Service");
        if self.enforce_grants
            && let Some(to_ns) = &b.namespace
            && *to_ns != ns
            && !self.grants.allowed(
                (api::GROUP, self.config.kind.name(), &ns),
                (group, kind, to_ns, &b.name),
            )
        {
            return Err(RuleError::new(
                "RefNotPermitted",
                format!(
                    "backendRef {}/{to_ns} not accessible to a {} in namespace {ns:?} (missing a ReferenceGrant?)",
                    b.name,
                    self.config.kind.name()
                ),
            ));
        }
        let target_ns = b.namespace.clone().unwrap_or(ns);
        let hostname = match (group, kind) {
            ("", "Service") => {
                if b.name.contains('.') {
                    return Err(RuleError::new(
                        "InvalidDestination",
                        "service name invalid; the name of the Service must be used, not the hostname.",
                    ));
                }
                self.backends.push(Reference::Service {
                    namespace: target_ns.clone(),
                    name: b.name.clone(),
                });
                format!("{}.{target_ns}.svc.{}", b.name, self.suffix)
            }
            ("networking.istio.io", "Hostname") => {
                if b.namespace.is_some() {
                    return Err(RuleError::new(
                        "InvalidDestination",
                        "namespace may not be set with Hostname type",
                    ));
                }
                self.backends.push(Reference::Hostname {
                    host: b.name.clone(),
                });
                b.name.clone()
            }
            _ => {
                return Err(RuleError::new(
                    "InvalidKind",
                    format!("referencing unsupported backendRef: group {group:?} kind {kind:?}"),
                ));
            }
        };
        let Some(port) = b.port else {
            return Err(RuleError::new(
                "InvalidDestination",
                "port is required in backendRef",
            ));
        };
        Ok(Destination {
            host: hostname,
            subset: String::new(),
            port: Some(PortSelector { number: port }),
        })
    }
}

fn duration(s: &str) -> Option<Duration> {
    parse_go_duration(s)
        .ok()
        .filter(|d| !d.is_zero())
        .map(Duration)
}

fn uri_match(path: Option<&api::HttpPathMatch>) -> Result<StringMatch, RuleError> {
    let value = path
        .and_then(|p| p.value.clone())
        .unwrap_or_else(|| "/".into());
    match path
        .and_then(|p| p.match_type.as_deref())
        .unwrap_or("PathPrefix")
    {
        "PathPrefix" => Ok(StringMatch::Prefix(if value == "/" {
            value
        } else {
            value.trim_end_matches('/').to_string()
        })),
        "Exact" => Ok(StringMatch::Exact(value)),
        "RegularExpression" => Ok(StringMatch::Regex(value)),
        other => Err(RuleError::new(
            "InvalidConfiguration",
            format!("unknown type: {other:?} is not supported Path match type"),
        )),
    }
}

fn header_matches(matches: &[HttpHeaderMatch]) -> Result<BTreeMap<String, StringMatch>, RuleError> {
    let mut out = BTreeMap::new();
    for h in matches {
        let m = match h.match_type.as_deref().unwrap_or("Exact") {
            "Exact" => StringMatch::Exact(h.value.clone()),
            "RegularExpression" => StringMatch::Regex(h.value.clone()),
            other => {
                return Err(RuleError::new(
                    "InvalidConfiguration",
                    format!("unknown type: {other:?} is not supported match type"),
                ));
            }
        };
        out.insert(h.name.clone(), m);
    }
    Ok(out)
}

/// gRPC `/<service>/<method>` as a path match (istiod's `createGRPCURIMatch`).
fn grpc_method_match(m: Option<&api::GrpcMethodMatch>) -> Result<Option<StringMatch>, RuleError> {
    let Some(m) = m else { return Ok(None) };
    let regex = m.match_type.as_deref() == Some("RegularExpression");
    Ok(Some(match (m.service.as_deref(), m.method.as_deref()) {
        (None, None) => {
            return Err(RuleError::new(
                "InvalidConfiguration",
                "gRPC match must have method or service defined",
            ));
        }
        (Some(s), None) if regex => StringMatch::Regex(format!("/{s}/.+")),
        (Some(s), None) => StringMatch::Prefix(format!("/{s}/")),
        (None, Some(m)) => StringMatch::Regex(format!("/[^/]+/{m}")),
        (Some(s), Some(m)) if regex => StringMatch::Regex(format!("/{s}/{m}")),
        (Some(s), Some(m)) => StringMatch::Exact(format!("/{s}/{m}")),
    }))
}

/// Header additions, settings and removals; a value with control characters is refused.
fn header_ops(f: Option<&HttpHeaderFilter>) -> Result<Option<HeaderOperations>, RuleError> {
    let Some(f) = f else { return Ok(None) };
    for h in f.set.iter().chain(&f.add) {
        if h.value
            .bytes()
            .any(|c| c != b'\t' && (c < 0x20 || c == 0x7f))
        {
            return Err(RuleError::new(
                "InvalidFilter",
                format!("header {:?} value contains invalid characters", h.name),
            ));
        }
    }
    // "Subsequent entries with an equivalent header name MUST be ignored."
    let first = |list: &[api::HttpHeader]| {
        let mut out = BTreeMap::new();
        for h in list {
            out.entry(h.name.to_ascii_lowercase())
                .or_insert_with(|| h.value.clone());
        }
        out
    };
    Ok(Some(HeaderOperations {
        set: first(&f.set),
        add: first(&f.add),
        remove: f.remove.clone(),
    }))
}

fn redirect(f: &api::HttpRequestRedirectFilter) -> HttpRedirect {
    let mut r = HttpRedirect {
        // The CRD's default (the API server writes it; a config directory may not).
        redirect_code: f.status_code.unwrap_or(302),
        authority: f.hostname.clone().unwrap_or_default(),
        scheme: f.scheme.clone().unwrap_or_default(),
        ..Default::default()
    };
    match f.port {
        Some(p) => r.port = Some(p),
        // "When empty, the port of the request is used" unless the scheme changes.
        None if f.scheme.is_some() => {
            r.derive_port = Some(RedirectPortSelection::FROM_PROTOCOL_DEFAULT)
        }
        None => r.derive_port = Some(RedirectPortSelection::FROM_REQUEST_PORT),
    }
    if let Some(p) = &f.path {
        match p.modifier_type.as_str() {
            "ReplaceFullPath" => r.uri = p.replace_full_path.clone().unwrap_or_default(),
            "ReplacePrefixMatch" => {
                r.uri = format!(
                    "{PREFIX_MARK}{}",
                    p.replace_prefix_match.clone().unwrap_or_default()
                )
            }
            _ => {}
        }
    }
    r
}

/// A filter istiod does not translate where it stands (a type it does not implement, or one a
/// gRPC rule or a backend cannot take).
fn unsupported(t: &FilterType) -> RuleError {
    RuleError::new(
        "InvalidFilter",
        format!("unsupported filter type {:?}", t.name()),
    )
}

/// Marks a redirect path that replaces the matched prefix (istiod's `%PREFIX()%`).
pub const PREFIX_MARK: &str = "%PREFIX()%";

fn rewrite(f: &api::HttpUrlRewriteFilter) -> Option<HttpRewrite> {
    let mut r = HttpRewrite::default();
    if let Some(p) = &f.path {
        match p.modifier_type.as_str() {
            "ReplacePrefixMatch" => {
                let prefix = p.replace_prefix_match.clone().unwrap_or_default();
                let trimmed = prefix.trim_end_matches('/');
                r.uri = if trimmed.is_empty() {
                    "/".into()
                } else {
                    trimmed.to_string()
                };
            }
            "ReplaceFullPath" => {
                r.uri_regex_rewrite = Some(RegexRewrite {
                    match_regex: "/.*".into(),
                    rewrite: p.replace_full_path.clone().unwrap_or_default(),
                })
            }
            _ => {}
        }
    }
    if let Some(h) = &f.hostname {
        r.authority = h.clone();
    }
    (!r.uri.is_empty() || r.uri_regex_rewrite.is_some() || !r.authority.is_empty()).then_some(r)
}

/// Origins as istiod matches them: `*` any valid origin, a trailing `*` a prefix, other
/// wildcards a regex, the rest exactly.
fn cors(f: &api::HttpCorsFilter) -> CorsPolicy {
    let origins = f
        .allow_origins
        .iter()
        .filter(|o| !o.is_empty())
        .map(|o| {
            if o == "*" {
                StringMatch::Regex(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s?#]+$".into())
            } else if !o.contains('*') {
                StringMatch::Exact(o.clone())
            } else if o.matches('*').count() == 1 && o.ends_with('*') {
                StringMatch::Prefix(o.trim_end_matches('*').to_string())
            } else {
                let escaped: Vec<String> = o.split('*').map(quote_meta).collect();
                StringMatch::Regex(format!("^{}$", escaped.join(".*")))
            }
        })
        .collect();
    CorsPolicy {
        allow_origins: origins,
        allow_methods: f.allow_methods.clone(),
        allow_headers: f.allow_headers.clone(),
        expose_headers: f.expose_headers.clone(),
        max_age: f
            .max_age
            .filter(|a| *a > 0)
            .map(|a| Duration(std::time::Duration::from_secs(u64::from(a)))),
        allow_credentials: f.allow_credentials.filter(|c| *c),
        unmatched_preflights: Some(UnmatchedPreflights::IGNORE),
        ..Default::default()
    }
}

/// `s` with regex metacharacters escaped (Go's `regexp.QuoteMeta`).
pub fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The spec's precedence among rules of one hostname (istiod's `sortHTTPRoutes`, stable): a
/// rule without match last; exact paths before prefixes before regexes, longer first; then
/// a method; then more header matches; then more query matches.
pub(super) fn sort_http_routes(routes: &mut [istio::HttpRoute]) {
    fn rank(m: &HttpMatchRequest) -> (i32, usize) {
        match &m.uri {
            Some(StringMatch::Exact(p)) => (3, p.len()),
            Some(StringMatch::Prefix(p)) => (2, p.len()),
            Some(StringMatch::Regex(p)) => (1, p.len()),
            _ => (-1, 0),
        }
    }
    routes.sort_by(|a, b| {
        use std::cmp::Ordering;
        match (a.matches.first(), b.matches.first()) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(m1), Some(m2)) => rank(m2)
                .cmp(&rank(m1))
                .then(m2.method.is_some().cmp(&m1.method.is_some()))
                .then(m2.headers.len().cmp(&m1.headers.len()))
                .then(m2.query_params.len().cmp(&m1.query_params.len())),
        }
    });
}

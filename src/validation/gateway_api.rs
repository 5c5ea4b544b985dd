//! The Gateway API's own rules (the v1.5 CRDs' schema limits, patterns and CEL rules), which the
//! API server enforces in a cluster: checked here so that a config directory and `rudder
//! validate` refuse what `kubectl apply` would.

use super::report::Report;
use crate::config::gateway_api::{
    BackendRef, BackendTlsPolicy, FilterType, Gateway, GatewayClass, GrpcRoute, HttpBackendRef,
    HttpHeaderMatch, HttpRoute, HttpRouteFilter, L4RouteRule, ParentReference, ReferenceGrant,
    TlsRoute,
};
use regex::Regex;
use std::collections::BTreeSet;
use std::sync::LazyLock;

static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .expect("static regex")
});
static SECTION_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .expect("static regex")
});
static HEADER_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$").expect("static regex"));
static CONTROLLER_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
        .expect("static regex")
});
static PROTOCOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]+$")
        .expect("static regex")
});
static DURATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$").expect("static regex"));

fn hostname(r: &mut Report, path: String, h: &str) {
    if h.is_empty() || h.len() > 253 || !HOSTNAME.is_match(h) {
        r.error(
            path,
            format!("{h:?} is not a valid hostname (a DNS name, optionally starting with \"*.\")"),
        );
    } else if h.parse::<std::net::IpAddr>().is_ok() {
        r.error(path, format!("{h:?}: an IP address is not a hostname"));
    }
}

fn duration(r: &mut Report, path: String, d: &str) {
    if !DURATION.is_match(d) {
        r.error(
            path,
            format!(
                "{d:?} is not a Gateway API duration (e.g. 1h, 10s, 500ms; at most four parts)"
            ),
        );
    }
}

fn port(r: &mut Report, path: String, p: u32) {
    if !(1..=65535).contains(&p) {
        r.error(path, format!("port {p} must be between 1 and 65535"));
    }
}

pub fn gateway_class(r: &mut Report, c: &GatewayClass) {
    if c.controller_name.is_empty() || !CONTROLLER_NAME.is_match(&c.controller_name) {
        r.error(
            "spec.controllerName",
            "controllerName must be a domain-prefixed path (e.g. istio.io/gateway-controller)",
        );
    }
}

pub fn gateway(r: &mut Report, g: &Gateway) {
    if g.gateway_class_name.is_empty() {
        r.error("spec.gatewayClassName", "gatewayClassName is required");
    }
    if g.listeners.is_empty() || g.listeners.len() > 64 {
        r.error("spec.listeners", "a Gateway has 1 to 64 listeners");
    }
    listeners(r, &g.listeners);
    for (i, a) in g.addresses.iter().enumerate() {
        if !matches!(
            a.address_type.as_deref(),
            None | Some("IPAddress" | "Hostname" | "NamedAddress")
        ) && !a.address_type.as_deref().is_some_and(|t| t.contains('/'))
        {
            r.error(
                format!("spec.addresses[{i}].type"),
                "type must be IPAddress, Hostname, NamedAddress or a domain-prefixed type",
            );
        }
        match a.address_type.as_deref() {
            None | Some("IPAddress")
                if !a.value.is_empty() && a.value.parse::<std::net::IpAddr>().is_err() =>
            {
                r.error(
                    format!("spec.addresses[{i}].value"),
                    "value must be an IP address",
                )
            }
            Some("Hostname") => hostname(r, format!("spec.addresses[{i}].value"), &a.value),
            _ => {}
        }
    }
}

/// A ListenerSet: a parent Gateway and 1 to 64 listeners with a Gateway's listener rules.
pub fn listener_set(r: &mut Report, ls: &crate::config::gateway_api::ListenerSet) {
    if ls.parent_ref.name.is_empty() {
        r.error(
            "spec.parentRef.name",
            "the parent Gateway's name is required",
        );
    }
    if ls.listeners.is_empty() || ls.listeners.len() > 64 {
        r.error("spec.listeners", "a ListenerSet has 1 to 64 listeners");
    }
    listeners(r, &ls.listeners);
}

/// The rules every listener of a Gateway or ListenerSet follows, and those between them.
fn listeners(r: &mut Report, listeners: &[crate::config::gateway_api::Listener]) {
    let mut names = BTreeSet::new();
    let mut combos = BTreeSet::new();
    for (i, l) in listeners.iter().enumerate() {
        let p = format!("spec.listeners[{i}]");
        if !SECTION_NAME.is_match(&l.name) || l.name.len() > 253 {
            r.error(
                format!("{p}.name"),
                format!("{:?} is not a valid listener name", l.name),
            );
        }
        if !names.insert(l.name.as_str()) {
            r.error(
                format!("{p}.name"),
                "Listener name must be unique within the Gateway",
            );
        }
        port(r, format!("{p}.port"), l.port);
        if !PROTOCOL.is_match(&l.protocol) {
            r.error(
                format!("{p}.protocol"),
                format!("{:?} is not a valid protocol", l.protocol),
            );
        }
        if let Some(h) = &l.hostname {
            hostname(r, format!("{p}.hostname"), h);
            if matches!(l.protocol.as_str(), "TCP" | "UDP") {
                r.error(
                    format!("{p}.hostname"),
                    "hostname must not be specified for protocols ['TCP', 'UDP']",
                );
            }
        }
        if !combos.insert((
            l.port,
            l.protocol.as_str(),
            l.hostname.as_deref().unwrap_or(""),
        )) {
            r.error(
                p.clone(),
                "Combination of port, protocol and hostname must be unique for each listener",
            );
        }
        match (&l.tls, l.protocol.as_str()) {
            (Some(_), "HTTP" | "TCP" | "UDP") => r.error(
                format!("{p}.tls"),
                "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
            ),
            (None, "HTTPS") => r.error(
                format!("{p}.tls"),
                "tls must be specified for protocols ['HTTPS']",
            ),
            (Some(t), _) => {
                let terminate = t.mode.as_deref().unwrap_or("Terminate") == "Terminate";
                if terminate && t.certificate_refs.is_empty() && t.options.is_empty() {
                    r.error(
                        format!("{p}.tls"),
                        "certificateRefs or options must be specified when mode is Terminate",
                    );
                }
                if !matches!(
                    t.mode.as_deref(),
                    None | Some("Terminate") | Some("Passthrough")
                ) {
                    r.error(
                        format!("{p}.tls.mode"),
                        "mode must be Terminate or Passthrough",
                    );
                }
                if l.protocol == "HTTPS" && !terminate {
                    r.error(
                        format!("{p}.tls.mode"),
                        "HTTPS listeners terminate TLS (mode Terminate)",
                    );
                }
            }
            (None, _) => {}
        }
        if let Some(ns) = l
            .allowed_routes
            .as_ref()
            .and_then(|a| a.namespaces.as_ref())
        {
            match ns.from.as_deref() {
                None | Some("All" | "Same") => {}
                Some("Selector") if ns.selector.is_none() => r.error(
                    format!("{p}.allowedRoutes.namespaces.selector"),
                    "selector must be specified when from is Selector",
                ),
                Some("Selector") => {}
                Some(other) => r.error(
                    format!("{p}.allowedRoutes.namespaces.from"),
                    format!("unsupported value {other:?}: All, Selector or Same"),
                ),
            }
        }
    }
}

fn parent_refs(r: &mut Report, refs: &[ParentReference]) {
    if refs.len() > 32 {
        r.error("spec.parentRefs", "at most 32 parentRefs");
    }
    let mut seen = BTreeSet::new();
    for (i, p) in refs.iter().enumerate() {
        let path = format!("spec.parentRefs[{i}]");
        if p.name.is_empty() {
            r.error(format!("{path}.name"), "name is required");
        }
        if let Some(number) = p.port {
            port(r, format!("{path}.port"), number);
        }
        let key = (
            p.group.clone().unwrap_or_default(),
            p.kind.clone().unwrap_or_default(),
            p.namespace.clone().unwrap_or_default(),
            p.name.clone(),
            p.section_name.clone().unwrap_or_default(),
            p.port.unwrap_or(0),
        );
        if !seen.insert(key) {
            r.error(path, "sectionName or port must be specified when parentRefs includes 2 or more references to the same parent");
        }
    }
}

fn hostnames(r: &mut Report, hosts: &[String]) {
    if hosts.len() > 16 {
        r.error("spec.hostnames", "at most 16 hostnames");
    }
    for (i, h) in hosts.iter().enumerate() {
        hostname(r, format!("spec.hostnames[{i}]"), h);
    }
}

fn backend(r: &mut Report, path: &str, b: &BackendRef) {
    if b.name.is_empty() {
        r.error(format!("{path}.name"), "name is required");
    }
    let service = b.group.as_deref().unwrap_or("").is_empty()
        && b.kind.as_deref().unwrap_or("Service") == "Service";
    match b.port {
        Some(p) => port(r, format!("{path}.port"), p),
        None if service => r.error(
            format!("{path}.port"),
            "Must have port for Service reference",
        ),
        None => {}
    }
    if b.weight.is_some_and(|w| w > 1_000_000) {
        r.error(
            format!("{path}.weight"),
            "weight must be between 0 and 1000000",
        );
    }
}

fn header_matches(r: &mut Report, path: &str, matches: &[HttpHeaderMatch]) {
    let mut names = BTreeSet::new();
    for (i, h) in matches.iter().enumerate() {
        if !HEADER_NAME.is_match(&h.name) {
            r.error(
                format!("{path}[{i}].name"),
                format!("{:?} is not a valid header name", h.name),
            );
        }
        if !names.insert(h.name.to_ascii_lowercase()) {
            r.error(
                format!("{path}[{i}].name"),
                "header names must be unique within a match",
            );
        }
        if !matches!(
            h.match_type.as_deref(),
            None | Some("Exact" | "RegularExpression")
        ) {
            r.error(
                format!("{path}[{i}].type"),
                "type must be Exact or RegularExpression",
            );
        }
        if h.match_type.as_deref() == Some("RegularExpression")
            && let Err(e) = super::helpers::regex(&h.value)
        {
            r.error(format!("{path}[{i}].value"), e);
        }
    }
}

/// The filter's type names the one field that is set (the CRDs' CEL rules).
fn filter(r: &mut Report, path: &str, f: &HttpRouteFilter) {
    for t in FilterType::ALL {
        if (t == f.filter_type) != f.sets(&t) {
            r.error(
                path.to_string(),
                format!(
                    "filter.{} must be specified for {} filter.type, and only then",
                    t.field(),
                    t.name()
                ),
            );
        }
    }
    for (which, modifier) in [
        ("requestHeaderModifier", &f.request_header_modifier),
        ("responseHeaderModifier", &f.response_header_modifier),
    ] {
        if let Some(m) = modifier {
            for h in m.set.iter().chain(&m.add) {
                if !HEADER_NAME.is_match(&h.name) {
                    r.error(
                        format!("{path}.{which}"),
                        format!("{:?} is not a valid header name", h.name),
                    );
                }
            }
        }
    }
    for (which, path_mod) in [
        (
            "requestRedirect",
            f.request_redirect.as_ref().and_then(|x| x.path.as_ref()),
        ),
        (
            "urlRewrite",
            f.url_rewrite.as_ref().and_then(|x| x.path.as_ref()),
        ),
    ] {
        if let Some(m) = path_mod {
            let ok = match m.modifier_type.as_str() {
                "ReplaceFullPath" => {
                    m.replace_full_path.is_some() && m.replace_prefix_match.is_none()
                }
                "ReplacePrefixMatch" => {
                    m.replace_prefix_match.is_some() && m.replace_full_path.is_none()
                }
                _ => false,
            };
            if !ok {
                r.error(format!("{path}.{which}.path"), "replaceFullPath must be specified when type is ReplaceFullPath, and replacePrefixMatch when type is ReplacePrefixMatch");
            }
        }
    }
    if let Some(m) = &f.request_mirror {
        backend(
            r,
            &format!("{path}.requestMirror.backendRef"),
            &m.backend_ref,
        );
        if m.percent.is_some() && m.fraction.is_some() {
            r.error(
                format!("{path}.requestMirror"),
                "Only one of percent or fraction may be specified in HTTPRequestMirrorFilter",
            );
        }
        if m.percent.is_some_and(|p| p > 100) {
            r.error(
                format!("{path}.requestMirror.percent"),
                "percent must be between 0 and 100",
            );
        }
        if let Some(fr) = &m.fraction
            && fr.numerator > fr.denominator.unwrap_or(100)
        {
            r.error(
                format!("{path}.requestMirror.fraction"),
                "numerator must be less than or equal to denominator",
            );
        }
    }
    if let Some(rd) = &f.request_redirect {
        if rd
            .status_code
            .is_some_and(|c| ![301, 302, 303, 307, 308].contains(&c))
        {
            r.error(
                format!("{path}.requestRedirect.statusCode"),
                "statusCode must be 301, 302, 303, 307 or 308",
            );
        }
        if let Some(p) = rd.port {
            port(r, format!("{path}.requestRedirect.port"), p);
        }
        if rd
            .scheme
            .as_deref()
            .is_some_and(|s| s != "http" && s != "https")
        {
            r.error(
                format!("{path}.requestRedirect.scheme"),
                "scheme must be http or https",
            );
        }
    }
}

fn backends_with_filters(r: &mut Report, path: &str, refs: &[HttpBackendRef]) {
    for (i, b) in refs.iter().enumerate() {
        let p = format!("{path}[{i}]");
        backend(r, &p, &b.backend());
        for (j, f) in b.filters.iter().enumerate() {
            filter(r, &format!("{p}.filters[{j}]"), f);
        }
    }
}

pub fn http_route(r: &mut Report, h: &HttpRoute) {
    parent_refs(r, &h.parent_refs);
    hostnames(r, &h.hostnames);
    if h.rules.len() > 16 {
        r.error("spec.rules", "at most 16 rules");
    }
    let mut rule_names = BTreeSet::new();
    for (i, rule) in h.rules.iter().enumerate() {
        let p = format!("spec.rules[{i}]");
        if let Some(n) = &rule.name
            && !rule_names.insert(n.as_str())
        {
            r.error(
                format!("{p}.name"),
                "Rule name must be unique within the route",
            );
        }
        if rule.matches.len() > 64 {
            r.error(format!("{p}.matches"), "at most 64 matches");
        }
        for (j, m) in rule.matches.iter().enumerate() {
            let mp = format!("{p}.matches[{j}]");
            if let Some(path) = &m.path {
                let value = path.value.as_deref().unwrap_or("/");
                match path.match_type.as_deref().unwrap_or("PathPrefix") {
                    "PathPrefix" | "Exact" => {
                        if !value.starts_with('/') {
                            r.error(format!("{mp}.path.value"), "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']");
                        }
                        if value.contains("//")
                            || value.contains("/./")
                            || value.contains("/../")
                            || value.contains("%2f")
                            || value.contains("%2F")
                            || value.contains('#')
                            || value.ends_with("/..")
                            || value.ends_with("/.")
                        {
                            r.error(format!("{mp}.path.value"), "must not contain '//', '/./', '/../', '%2f', '%2F' or '#', nor end with '/..' or '/.'");
                        }
                    }
                    "RegularExpression" => {
                        if let Err(e) = super::helpers::regex(value) {
                            r.error(format!("{mp}.path.value"), e);
                        }
                    }
                    other => r.error(
                        format!("{mp}.path.type"),
                        format!(
                            "unsupported value {other:?}: Exact, PathPrefix or RegularExpression"
                        ),
                    ),
                }
            }
            header_matches(r, &format!("{mp}.headers"), &m.headers);
            header_matches(r, &format!("{mp}.queryParams"), &m.query_params);
            if m.method.as_deref().is_some_and(|x| {
                ![
                    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
                ]
                .contains(&x)
            }) {
                r.error(
                    format!("{mp}.method"),
                    "method must be an HTTP method in upper case",
                );
            }
        }
        let types: Vec<&FilterType> = rule.filters.iter().map(|f| &f.filter_type).collect();
        if types.contains(&&FilterType::RequestRedirect) && types.contains(&&FilterType::UrlRewrite)
        {
            r.error(format!("{p}.filters"), "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both");
        }
        for once in [
            FilterType::RequestHeaderModifier,
            FilterType::ResponseHeaderModifier,
            FilterType::RequestRedirect,
            FilterType::UrlRewrite,
            FilterType::Cors,
        ] {
            if types.iter().filter(|t| ***t == once).count() > 1 {
                r.error(
                    format!("{p}.filters"),
                    format!("{} filter cannot be repeated", once.name()),
                );
            }
        }
        if types.contains(&&FilterType::RequestRedirect) && !rule.backend_refs.is_empty() {
            r.error(
                p.clone(),
                "RequestRedirect filter must not be used together with backendRefs",
            );
        }
        let prefix_rewrite = rule.filters.iter().any(|f| {
            f.request_redirect
                .as_ref()
                .and_then(|x| x.path.as_ref())
                .or(f.url_rewrite.as_ref().and_then(|x| x.path.as_ref()))
                .is_some_and(|p| p.modifier_type == "ReplacePrefixMatch")
        });
        if prefix_rewrite {
            let ok = rule.matches.len() == 1
                && rule.matches[0].path.as_ref().is_some_and(|p| {
                    p.match_type.as_deref().unwrap_or("PathPrefix") == "PathPrefix"
                });
            if !ok {
                r.error(format!("{p}.filters"), "When using a path modifier of type ReplacePrefixMatch, exactly one PathPrefix match must be specified");
            }
        }
        for (j, f) in rule.filters.iter().enumerate() {
            filter(r, &format!("{p}.filters[{j}]"), f);
        }
        backends_with_filters(r, &format!("{p}.backendRefs"), &rule.backend_refs);
        if let Some(t) = &rule.timeouts {
            if let Some(d) = &t.request {
                duration(r, format!("{p}.timeouts.request"), d);
            }
            if let Some(d) = &t.backend_request {
                duration(r, format!("{p}.timeouts.backendRequest"), d);
            }
            if let (Some(req), Some(back)) = (&t.request, &t.backend_request) {
                let parse = |s: &str| crate::config::common::parse_go_duration(s).ok();
                if let (Some(req), Some(back)) = (parse(req), parse(back))
                    && !req.is_zero()
                    && back > req
                {
                    r.error(
                        format!("{p}.timeouts"),
                        "backendRequest timeout cannot be longer than request timeout",
                    );
                }
            }
        }
        if let Some(b) = rule.retry.as_ref().and_then(|x| x.backoff.as_ref()) {
            duration(r, format!("{p}.retry.backoff"), b);
        }
    }
}

pub fn grpc_route(r: &mut Report, g: &GrpcRoute) {
    parent_refs(r, &g.parent_refs);
    hostnames(r, &g.hostnames);
    for (i, rule) in g.rules.iter().enumerate() {
        let p = format!("spec.rules[{i}]");
        for (j, m) in rule.matches.iter().enumerate() {
            let mp = format!("{p}.matches[{j}]");
            if let Some(method) = &m.method
                && method.service.is_none()
                && method.method.is_none()
            {
                r.error(
                    format!("{mp}.method"),
                    "One or both of 'service' or 'method' must be specified",
                );
            }
            header_matches(r, &format!("{mp}.headers"), &m.headers);
        }
        for (j, f) in rule.filters.iter().enumerate() {
            filter(r, &format!("{p}.filters[{j}]"), f);
        }
        backends_with_filters(r, &format!("{p}.backendRefs"), &rule.backend_refs);
    }
}

pub fn l4_route(r: &mut Report, refs: &[ParentReference], rules: &[L4RouteRule]) {
    parent_refs(r, refs);
    if rules.is_empty() || rules.len() > 16 {
        r.error("spec.rules", "a route has 1 to 16 rules");
    }
    for (i, rule) in rules.iter().enumerate() {
        if rule.backend_refs.is_empty() || rule.backend_refs.len() > 16 {
            r.error(
                format!("spec.rules[{i}].backendRefs"),
                "a rule has 1 to 16 backendRefs",
            );
        }
        for (j, b) in rule.backend_refs.iter().enumerate() {
            backend(r, &format!("spec.rules[{i}].backendRefs[{j}]"), b);
        }
    }
}

pub fn tls_route(r: &mut Report, t: &TlsRoute) {
    hostnames(r, &t.hostnames);
    l4_route(r, &t.parent_refs, &t.rules);
}

pub fn reference_grant(r: &mut Report, g: &ReferenceGrant) {
    if g.from.is_empty() || g.from.len() > 16 {
        r.error("spec.from", "a ReferenceGrant has 1 to 16 from entries");
    }
    if g.to.is_empty() || g.to.len() > 16 {
        r.error("spec.to", "a ReferenceGrant has 1 to 16 to entries");
    }
    for (i, f) in g.from.iter().enumerate() {
        if f.kind.is_empty() || f.namespace.is_empty() {
            r.error(format!("spec.from[{i}]"), "kind and namespace are required");
        }
    }
    for (i, t) in g.to.iter().enumerate() {
        if t.kind.is_empty() {
            r.error(format!("spec.to[{i}].kind"), "kind is required");
        }
    }
}

/// BackendTLSPolicy, with the CRD's rules: 1 to 16 targets, a `sectionName` on every reference
/// to a target named more than once and unique among them, a precise `hostname`, CA certificates
/// from references (at most 8) or a well-known set (not both, one of them), and at most 5
/// subject alternative names, each of its type.
pub fn backend_tls_policy(r: &mut Report, p: &BackendTlsPolicy) {
    if p.target_refs.is_empty() || p.target_refs.len() > 16 {
        r.error(
            "spec.targetRefs",
            "a BackendTLSPolicy has 1 to 16 targetRefs",
        );
    }
    for (i, a) in p.target_refs.iter().enumerate() {
        if a.kind.is_empty() || a.name.is_empty() {
            r.error(
                format!("spec.targetRefs[{i}]"),
                "kind and name are required",
            );
        }
        let same = |b: &&crate::config::gateway_api::PolicyTargetReference| {
            a.group == b.group && a.kind == b.kind && a.name == b.name
        };
        let section = |t: &crate::config::gateway_api::PolicyTargetReference| {
            t.section_name.clone().filter(|s| !s.is_empty())
        };
        let others: Vec<_> = p.target_refs.iter().filter(same).collect();
        if others.len() > 1 {
            if others
                .iter()
                .any(|b| section(a).is_some() != section(b).is_some())
            {
                r.error(
                    format!("spec.targetRefs[{i}]"),
                    "sectionName must be specified when targetRefs includes 2 or more references to the same target",
                );
            } else if others.iter().filter(|b| section(b) == section(a)).count() > 1 {
                r.error(
                    format!("spec.targetRefs[{i}]"),
                    "sectionName must be unique when targetRefs includes 2 or more references to the same target",
                );
            }
        }
    }
    let v = &p.validation;
    if v.hostname.starts_with("*.") || v.hostname.starts_with('*') {
        r.error(
            "spec.validation.hostname",
            format!(
                "{:?}: a precise hostname is required (no wildcard)",
                v.hostname
            ),
        );
    } else {
        hostname(r, "spec.validation.hostname".into(), &v.hostname);
    }
    if v.ca_certificate_refs.len() > 8 {
        r.error(
            "spec.validation.caCertificateRefs",
            "at most 8 caCertificateRefs",
        );
    }
    for (i, c) in v.ca_certificate_refs.iter().enumerate() {
        if c.kind.is_empty() || c.name.is_empty() {
            r.error(
                format!("spec.validation.caCertificateRefs[{i}]"),
                "kind and name are required",
            );
        }
    }
    let well_known = v
        .well_known_ca_certificates
        .as_deref()
        .filter(|w| !w.is_empty());
    match (v.ca_certificate_refs.is_empty(), well_known) {
        (false, Some(_)) => r.error(
            "spec.validation",
            "must not contain both CACertificateRefs and WellKnownCACertificates",
        ),
        (true, None) => r.error(
            "spec.validation",
            "must specify either CACertificateRefs or WellKnownCACertificates",
        ),
        _ => {}
    }
    if v.subject_alt_names.len() > 5 {
        r.error(
            "spec.validation.subjectAltNames",
            "at most 5 subjectAltNames",
        );
    }
    for (i, san) in v.subject_alt_names.iter().enumerate() {
        let path = format!("spec.validation.subjectAltNames[{i}]");
        let has = |o: &Option<String>| o.as_deref().is_some_and(|v| !v.is_empty());
        match san.type_.as_str() {
            "Hostname" if !has(&san.hostname) => r.error(
                path,
                "SubjectAltName element must contain Hostname, if Type is set to Hostname",
            ),
            "Hostname" if has(&san.uri) => r.error(
                path,
                "SubjectAltName element must not contain URI, if Type is not set to URI",
            ),
            "URI" if !has(&san.uri) => r.error(
                path,
                "SubjectAltName element must contain URI, if Type is set to URI",
            ),
            "URI" if has(&san.hostname) => r.error(
                path,
                "SubjectAltName element must not contain Hostname, if Type is not set to Hostname",
            ),
            "Hostname" | "URI" => {}
            other => r.error(
                format!("{path}.type"),
                format!("{other:?}: supported values are \"Hostname\" and \"URI\""),
            ),
        }
    }
}

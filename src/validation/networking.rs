//! Rules for networking.istio.io kinds.

use super::Report;
use super::helpers as h;
use crate::config::common::StringMatch;
use crate::config::host;
use crate::config::networking::*;
use std::collections::{BTreeMap, HashMap, HashSet};

const SUPPORTED_RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

const HTTP_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE",
];

const MESH_GATEWAY: &str = "mesh";

pub fn virtual_service(r: &mut Report, namespace: &str, vs: &VirtualService) {
    let is_delegate = vs.hosts.is_empty();
    if is_delegate {
        if !vs.gateways.is_empty() {
            r.error(
                "spec.gateways",
                "delegate virtual service must have no gateways specified",
            );
        }
        if !vs.tls.is_empty() {
            r.error(
                "spec.tls",
                "delegate virtual service must have no tls route specified",
            );
        }
        if !vs.tcp.is_empty() {
            r.error(
                "spec.tcp",
                "delegate virtual service must have no tcp route specified",
            );
        }
    }
    let applies_to_mesh = vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == MESH_GATEWAY);
    let applies_to_gateway = !applies_to_mesh;
    gateway_names(r, "spec.gateways", &vs.gateways);
    if !applies_to_gateway {
        // JWT claims are only known where a gateway authenticates the request.
        for (i, route) in vs.http.iter().enumerate() {
            for (j, m) in route.matches.iter().enumerate() {
                for key in m.headers.keys().chain(m.without_headers.keys()) {
                    if key.starts_with("@request.auth.claims") {
                        r.error(
                            format!("spec.http[{i}].match[{j}]"),
                            format!(
                                "JWT claim based routing (key: {key}) is only supported for gateway, found no gateways: [{}]",
                                vs.gateways.join(" ")
                            ),
                        );
                    }
                }
            }
        }
    }

    let mut all_hosts_valid = true;
    // istiod's isSniHost: a gateway's VirtualService with TLS SNI matches may name the SNI
    // AUTO_PASSTHROUGH generates (`outbound_.<port>_._.<host>`) as a host.
    let sni_hosts = vs
        .tls
        .iter()
        .any(|t| t.matches.iter().any(|m| !m.sni_hosts.is_empty()));
    for (i, vh) in vs.hosts.iter().enumerate() {
        let path = format!("spec.hosts[{i}]");
        let checked = if applies_to_gateway && sni_hosts {
            generated_sni(vh).unwrap_or_else(|| h::wildcard_domain(vh))
        } else {
            h::wildcard_domain(vh)
        };
        if let Err(e) = checked {
            if h::ip(vh).is_err() {
                r.error(path, e);
                all_hosts_valid = false;
            }
        } else if applies_to_mesh && vh == "*" {
            r.error(
                path,
                "wildcard host * is not allowed for virtual services bound to the mesh gateway",
            );
            all_hosts_valid = false;
        }
    }
    if all_hosts_valid {
        for (i, j) in host::overlapping_pairs(&vs.hosts, 101) {
            r.error(
                "spec.hosts",
                format!(
                    "duplicate hosts in virtual service: {} & {}",
                    vs.hosts[i], vs.hosts[j]
                ),
            );
        }
    }
    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        r.error(
            "spec",
            "http, tcp or tls must be provided in virtual service",
        );
    }
    for (i, route) in vs.http.iter().enumerate() {
        let path = format!("spec.http[{i}]");
        http_route(r, &path, route, is_delegate);
    }
    for (i, route) in vs.tls.iter().enumerate() {
        tls_route(r, &format!("spec.tls[{i}]"), route, vs);
    }
    unreachable_rules(
        r,
        "spec.http",
        vs.http.iter().map(|h| {
            (
                h.name.as_str(),
                matches_json(&h.matches, |m| m.name.as_str()),
            )
        }),
    );
    overlapping_prefixes(r, "spec.http", &vs.http);
    unreachable_rules(
        r,
        "spec.tcp",
        vs.tcp
            .iter()
            .map(|t| ("", matches_json(&t.matches, |_| ""))),
    );
    unreachable_rules(
        r,
        "spec.tls",
        vs.tls
            .iter()
            .map(|t| ("", matches_json(&t.matches, |_| ""))),
    );
    for (i, route) in vs.tcp.iter().enumerate() {
        tcp_route(r, &format!("spec.tcp[{i}]"), route);
    }
    r.check(
        "spec.exportTo",
        h::export_to(namespace, &vs.export_to, false),
    );
}

/// A route's matches as (name, JSON) pairs, to compare them as istiod does.
fn matches_json<'a, M: serde::Serialize>(
    matches: &'a [M],
    name: impl Fn(&'a M) -> &'a str,
) -> Vec<(&'a str, String)> {
    matches
        .iter()
        .map(|m| (name(m), serde_json::to_string(m).unwrap_or_default()))
        .collect()
}

/// istiod's unreachable-rule warnings: a rule after one without matches, and a rule or match
/// that only repeats earlier matches (prefix matches covered by earlier ones:
/// `overlapping_prefixes`).
fn unreachable_rules<'a>(
    r: &mut Report,
    path: &str,
    routes: impl Iterator<Item = (&'a str, Vec<(&'a str, String)>)>,
) {
    let label = |name: &str, n: usize| {
        if name.is_empty() {
            format!("#{n}")
        } else {
            format!("{name:?}")
        }
    };
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut catch_all = false;
    for (n, (name, matches)) in routes.enumerate() {
        let rule = label(name, n);
        if matches.is_empty() {
            if catch_all {
                r.warn(
                    path,
                    format!("virtualService rule {rule} not used (only the last rule can have no matches)"),
                );
            }
            catch_all = true;
            continue;
        }
        let mut duplicates = 0;
        for (m, (match_name, json)) in matches.iter().enumerate() {
            if catch_all {
                r.warn(
                    path,
                    format!(
                        "virtualService rule {rule} not used (route without matches defined before)"
                    ),
                );
                continue;
            }
            match seen.get(json) {
                Some(earlier) => {
                    r.warn(
                        path,
                        format!(
                            "virtualService rule {rule} match {} is not used (duplicate/overlapping match in rule {earlier})",
                            label(match_name, m)
                        ),
                    );
                    duplicates += 1;
                }
                None => {
                    seen.insert(json.clone(), rule.clone());
                }
            }
        }
        if duplicates == matches.len() {
            r.warn(
                path,
                format!("virtualService rule {rule} not used (all matches used by prior rules)"),
            );
        }
    }
}

/// One URI-prefix match, as istiod compares them for overlap: each condition as `exact:v`,
/// `prefix:v` or empty (a regex), the method `exact:GET` when unset.
struct PrefixMatch {
    rule: String,
    request: String,
    prefix: String,
    port: u32,
    method: String,
    authority: String,
    headers: BTreeMap<String, String>,
    query_params: BTreeMap<String, String>,
    without_headers: BTreeMap<String, String>,
}

fn exact_or_prefix(m: Option<&StringMatch>) -> String {
    match m {
        Some(StringMatch::Exact(v)) if !v.is_empty() => format!("exact:{v}"),
        Some(StringMatch::Prefix(v)) if !v.is_empty() => format!("prefix:{v}"),
        _ => String::new(),
    }
}

/// Whether every request `later` matches is matched by `earlier` (istiod's coveredValidation).
fn covers(earlier: &PrefixMatch, later: &PrefixMatch) -> bool {
    let narrower = |a: &str, b: &str| a == b || a.starts_with(b);
    let maps = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| {
        a.len() == b.len()
            && a.iter()
                .all(|(k, v)| b.get(k).is_some_and(|bv| narrower(v, bv)))
    };
    later.prefix.starts_with(&earlier.prefix)
        && later.port == earlier.port
        && narrower(&earlier.method, &later.method)
        && narrower(&earlier.authority, &later.authority)
        && maps(&earlier.headers, &later.headers)
        && maps(&earlier.query_params, &later.query_params)
        && maps(&earlier.without_headers, &later.without_headers)
}

/// istiod's overlap analysis: a URI-prefix match that an earlier rule's shorter prefix (with the
/// same or wider other conditions) already takes is warned about.
fn overlapping_prefixes(r: &mut Report, path: &str, routes: &[HttpRoute]) {
    let label = |name: &str, n: usize| {
        if name.is_empty() {
            format!("#{n}")
        } else {
            format!("{name:?}")
        }
    };
    let mut seen = std::collections::HashSet::new();
    let mut candidates: Vec<PrefixMatch> = Vec::new();
    for (n, route) in routes.iter().enumerate() {
        if route.matches.is_empty() {
            // Matches after a catch-all are unreachable and reported as such.
            break;
        }
        for (m, req) in route.matches.iter().enumerate() {
            if !seen.insert(serde_json::to_string(req).unwrap_or_default()) {
                continue;
            }
            let Some(StringMatch::Prefix(prefix)) = &req.uri else {
                continue;
            };
            if prefix.is_empty() {
                continue;
            }
            let conditions = |m: &BTreeMap<String, StringMatch>| {
                m.iter()
                    .map(|(k, v)| (k.clone(), exact_or_prefix(Some(v))))
                    .collect()
            };
            let method = exact_or_prefix(req.method.as_ref());
            candidates.push(PrefixMatch {
                rule: label(&route.name, n),
                request: label(&req.name, m),
                prefix: prefix.clone(),
                port: req.port,
                method: if method.is_empty() {
                    "exact:GET".into()
                } else {
                    method
                },
                authority: exact_or_prefix(req.authority.as_ref()),
                headers: conditions(&req.headers),
                query_params: conditions(&req.query_params),
                without_headers: conditions(&req.without_headers),
            });
        }
    }
    for (i, earlier) in candidates.iter().enumerate() {
        for later in &candidates[i + 1..] {
            if later.prefix != earlier.prefix && covers(earlier, later) {
                r.warn(
                    path,
                    format!(
                        "virtualService rule {} match {} of prefix {} is not used (duplicate/overlapping match in rule {} of prefix {} on {})",
                        later.rule, later.request, later.prefix, earlier.request, earlier.prefix, earlier.rule
                    ),
                );
            }
        }
    }
}

/// Gateway references: `mesh`, `name`, `namespace/name` or a legacy FQDN (warned about). As in
/// istiod, checking stops at the first reference without a namespace.
fn gateway_names(r: &mut Report, path: &str, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let gp = format!("{path}[{i}]");
        let Some((ns, gw)) = name.split_once('/') else {
            if let Some((short, ns)) = name.split_once('.') {
                let ns = ns.split('.').next().unwrap_or_default();
                r.warn(
                    &gp,
                    format!("using legacy gatewayName format {name:?}; prefer the <namespace>/<name> format: \"{ns}/{short}\""),
                );
            }
            r.check(&gp, h::fqdn(name));
            return;
        };
        if ns.is_empty() || gw.is_empty() {
            r.error(&gp, "config namespace and gateway name cannot be empty");
        }
        if !h::is_dns1123_label(ns) {
            r.error(&gp, format!("invalid value for namespace: {ns:?}"));
        }
        if !h::is_dns1123_label(gw) {
            r.error(&gp, format!("invalid value for gateway name: {gw:?}"));
        }
    }
}

fn http_route(r: &mut Report, path: &str, route: &HttpRoute, in_delegate: bool) {
    if route.delegate.is_some() && in_delegate {
        r.error(
            format!("{path}.delegate"),
            "delegate HTTP route cannot contain delegate",
        );
    }
    if route.delegate.is_some() && !in_delegate {
        // A root route: only the delegate may be given.
        if route.redirect.is_some() {
            r.error(
                path,
                format!("root HTTP route {} must not specify redirect", route.name),
            );
        }
        if !route.route.is_empty() {
            r.error(
                path,
                format!("root HTTP route {} must not specify route", route.name),
            );
        }
    } else if let Some(redirect) = &route.redirect {
        if !route.route.is_empty() {
            r.error(path, "HTTP route cannot contain both route and redirect");
        }
        if route.fault.is_some() {
            r.error(path, "HTTP route cannot contain both fault and redirect");
        }
        if route.rewrite.is_some() {
            r.error(
                path,
                "HTTP route rule cannot contain both rewrite and redirect",
            );
        }
        if route.direct_response.is_some() {
            r.error(
                path,
                "HTTP route rule cannot contain both direct_response and redirect",
            );
        }
        http_redirect(r, &format!("{path}.redirect"), redirect);
    } else if let Some(dr) = &route.direct_response {
        if !route.route.is_empty() {
            r.error(
                path,
                "HTTP route cannot contain both route and direct_response",
            );
        }
        if route.fault.is_some() {
            r.error(
                path,
                "HTTP route cannot contain both fault and direct_response",
            );
        }
        if route.rewrite.is_some() {
            r.error(
                path,
                "HTTP route rule cannot contain both rewrite and direct_response",
            );
        }
        let body = match &dr.body {
            Some(HttpBody::String(text)) => text.len(),
            // base64 in YAML: the bytes Envoy would hold.
            Some(HttpBody::Bytes(b64)) => b64.len() / 4 * 3,
            None => 0,
        };
        if body > 1024 * 1024 {
            r.error(
                format!("{path}.directResponse.body"),
                "large direct_responses may impact control plane performance, must be less than 1MB",
            );
        } else if body > 100 * 1024 {
            r.warn(
                format!("{path}.directResponse.body"),
                "large direct_responses may impact control plane performance",
            );
        }
        // istiod's range check lets 600 through; so do we.
        if !(200..=600).contains(&dr.status) {
            r.error(
                format!("{path}.directResponse.status"),
                format!("HTTP status {} is not in range 200-599", dr.status),
            );
        }
    } else if route.route.is_empty() {
        r.error(path, "HTTP route, redirect or direct_response is required");
    }

    headers(r, &format!("{path}.headers"), route.headers.as_ref());
    authority_rewrite(r, path, route);
    if let Some(cors) = &route.cors_policy {
        cors_policy(r, &format!("{path}.corsPolicy"), cors);
    }
    if let Some(fault) = &route.fault {
        fault_injection(r, &format!("{path}.fault"), fault);
    }
    for (i, m) in route.matches.iter().enumerate() {
        http_match(r, &format!("{path}.match[{i}]"), m);
    }
    if route.mirror.is_some() && !route.mirrors.is_empty() {
        r.error(path, "HTTP route cannot contain both mirror and mirrors");
    }
    if let Some(m) = &route.mirror {
        destination(r, &format!("{path}.mirror"), m);
    }
    if route.websocket_upgrade.is_some() {
        r.warn(
            format!("{path}.websocketUpgrade"),
            "websocketUpgrade was removed from Istio's API and is ignored, as istiod ignores it: WebSocket upgrades are always allowed",
        );
    }
    if let Some(p) = route.mirror_percent {
        if p > 100 {
            r.error(
                format!("{path}.mirrorPercent"),
                format!("mirror_percent must have a max value of 100 (it has {p})"),
            );
        }
        r.warn(
            format!("{path}.mirrorPercent"),
            "using deprecated setting \"mirrorPercent\", use \"mirrorPercentage\" instead",
        );
    }
    if let Some(p) = &route.mirror_percentage {
        if p.value > 100.0 {
            r.error(
                format!("{path}.mirrorPercentage"),
                format!(
                    "mirror_percentage must have a max value of 100 (it has {:.6})",
                    p.value
                ),
            );
        }
        if p.value < 0.0 {
            r.error(
                format!("{path}.mirrorPercentage"),
                format!(
                    "mirror_percentage must have a min value of 0 (it has {:.6})",
                    p.value
                ),
            );
        }
    }
    for (i, m) in route.mirrors.iter().enumerate() {
        let mp = format!("{path}.mirrors[{i}]");
        match &m.destination {
            Some(d) => destination(r, &format!("{mp}.destination"), d),
            None => r.error(
                format!("{mp}.destination"),
                "destination is required for mirrors",
            ),
        }
        if let Some(p) = &m.percentage {
            if p.value > 100.0 {
                r.error(
                    format!("{mp}.percentage"),
                    format!(
                        "mirror percentage must have a max value of 100 (it has {:.6})",
                        p.value
                    ),
                );
            }
            if p.value < 0.0 {
                r.error(
                    format!("{mp}.percentage"),
                    format!(
                        "mirror percentage must have a min value of 0 (it has {:.6})",
                        p.value
                    ),
                );
            }
        }
    }
    if let Some(rw) = &route.rewrite {
        let rp = format!("{path}.rewrite");
        if !rw.uri.is_empty() && rw.uri_regex_rewrite.is_some() {
            r.error(
                &rp,
                "rewrite may only contain one of URI or UriRegexRewrite",
            );
        }
        if rw.uri.is_empty() && rw.authority.is_empty() && rw.uri_regex_rewrite.is_none() {
            r.error(
                &rp,
                "rewrite must specify at least one of URI, UriRegexRewrite, or authority. Only one of URI or UriRegexRewrite may be specified",
            );
        }
        if let Some(rr) = &rw.uri_regex_rewrite {
            if rr.match_regex.is_empty() || rr.rewrite.is_empty() {
                r.error(
                    format!("{rp}.uriRegexRewrite"),
                    "UriRegexRewrite requires both Rewrite and Match fields to be specified",
                );
            } else {
                r.check(
                    format!("{rp}.uriRegexRewrite.match"),
                    string_match(
                        &StringMatch::Regex(rr.match_regex.clone()),
                        "HTTPRewrite.UriRegexRewrite.Match",
                        false,
                    ),
                );
            }
        }
    }
    if let Some(retry) = &route.retries {
        http_retry(r, &format!("{path}.retries"), retry);
    }
    if let Some(t) = &route.timeout {
        r.check(format!("{path}.timeout"), h::duration(t));
    }
    http_route_destinations(r, &format!("{path}.route"), &route.route);
}

fn http_redirect(r: &mut Report, path: &str, redirect: &HttpRedirect) {
    if redirect.uri.is_empty()
        && redirect.authority.is_empty()
        && redirect.scheme.is_empty()
        && redirect.port.is_none()
        && redirect.derive_port.is_none()
    {
        r.error(
            path,
            "redirect must specify URI, authority, scheme, or port",
        );
    }
    if redirect.port.is_some() && redirect.derive_port.is_some() {
        r.error(path, "only one of port or derivePort may be set");
    }
    if let Some(p) = redirect.port {
        r.check(format!("{path}.port"), h::port(p));
    }
    // Any 3xx is admitted; codes Envoy has no name for are sent as 301 (as istiod does).
    if redirect.redirect_code != 0 && !(300..=399).contains(&redirect.redirect_code) {
        r.error(
            format!("{path}.redirectCode"),
            format!(
                "{} is not a valid redirect code, must be 3xx",
                redirect.redirect_code
            ),
        );
    }
    if !redirect.scheme.is_empty() && redirect.scheme != "http" && redirect.scheme != "https" {
        r.error(
            format!("{path}.scheme"),
            "invalid redirect scheme, must be \"http\" or \"https\"",
        );
    }
}

/// Header operations with istiod's rules: request set/add may target `:authority` (other
/// pseudo-headers never), response headers and removals may not touch `Host`; values must be
/// printable and their `%VAR%` expressions well formed (Envoy rejects the config otherwise).
fn headers(r: &mut Report, path: &str, headers: Option<&Headers>) {
    let Some(headers) = headers else { return };
    for (side, ops) in [
        ("request", &headers.request),
        ("response", &headers.response),
    ] {
        let Some(ops) = ops else { continue };
        let sp = format!("{path}.{side}");
        for (op, map) in [("set", &ops.set), ("add", &ops.add)] {
            for (name, value) in map {
                let np = format!("{sp}.{op}.{name}");
                let named = if side == "request" {
                    header_name_with_authority(name)
                } else {
                    header_operation_name(name)
                };
                r.check(np.clone(), named);
                r.check(np, header_value(value));
            }
        }
        for name in &ops.remove {
            r.check(format!("{sp}.remove"), header_operation_name(name));
        }
    }
}

fn header_name_with_authority(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("header name cannot be empty".into());
    }
    if name.starts_with(':') && !name.eq_ignore_ascii_case(":authority") {
        return Err(format!(
            "invalid header {name:?}: header cannot have \":\" prefix"
        ));
    }
    Ok(())
}

fn header_operation_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("header name cannot be empty".into());
    }
    if name.eq_ignore_ascii_case("host") {
        return Err(format!("invalid header {name:?}: cannot set Host header"));
    }
    if name.starts_with(':') {
        return Err(format!(
            "invalid header {name:?}: header cannot have \":\" prefix"
        ));
    }
    Ok(())
}

/// A header value as Envoy's header formatter reads it: no control characters, `%%` for a literal
/// `%`, and every `%VAR%` / `%VAR(["arg", …])%` closed.
pub(super) fn header_value(value: &str) -> Result<(), String> {
    if value
        .chars()
        .any(|c| matches!(c, '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'))
    {
        return Err(format!("header value configuration {value} is invalid"));
    }
    #[derive(PartialEq)]
    enum State {
        Literal,
        Name,
        ExpectArray,
        ExpectString,
        InString,
        ExpectDelimiterOrEnd,
        ExpectArgsEnd,
        ExpectVariableEnd,
    }
    let fail = |why: &str| {
        Err(format!(
            "header value configuration: invalid header configuration. {why}"
        ))
    };
    let bytes = value.as_bytes();
    let mut state = State::Literal;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let has_next = i + 1 < bytes.len();
        match state {
            State::Literal if c == b'%' => {
                if !has_next {
                    return fail("Un-escaped %");
                }
                if bytes[i + 1] == b'%' {
                    i += 1;
                } else {
                    state = State::Name;
                }
            }
            State::Literal => {}
            State::Name => match c {
                b'%' => state = State::Literal,
                b'(' => state = State::ExpectArray,
                _ => {}
            },
            State::ExpectArray => {
                if c == b'[' {
                    state = State::ExpectString;
                } else if c != b' ' {
                    state = State::InString;
                }
            }
            State::ExpectDelimiterOrEnd => match c {
                b',' => state = State::ExpectString,
                b']' => state = State::ExpectArgsEnd,
                b' ' => {}
                _ => return fail("Expecting ',', ']', or whitespace"),
            },
            State::ExpectString => {
                if c == b'"' {
                    state = State::InString;
                } else if c != b' ' {
                    return fail("Expecting '\"'");
                }
            }
            State::InString => match c {
                b'\\' => {
                    if !has_next {
                        return fail("Un-terminated backslash in JSON string");
                    }
                    i += 1;
                }
                b')' => state = State::ExpectVariableEnd,
                b'"' => state = State::ExpectDelimiterOrEnd,
                _ => {}
            },
            State::ExpectArgsEnd => {
                if c == b')' {
                    state = State::ExpectVariableEnd;
                } else if c != b' ' {
                    return fail("Expecting ')' or whitespace");
                }
            }
            State::ExpectVariableEnd => {
                if c == b'%' {
                    state = State::Literal;
                } else if c != b' ' {
                    return fail("Expecting '%' or whitespace after");
                }
            }
        }
        i += 1;
    }
    if state != State::Literal {
        return fail(&format!("Un-terminated variable expression '{value}'"));
    }
    Ok(())
}

fn cors_policy(r: &mut Report, path: &str, cors: &CorsPolicy) {
    for (i, o) in cors.allow_origins.iter().enumerate() {
        let op = format!("{path}.allowOrigins[{i}]");
        let text = match o {
            StringMatch::Exact(t) | StringMatch::Prefix(t) | StringMatch::Regex(t) => t,
            StringMatch::Any => "",
        };
        if text.is_empty() {
            r.error(op, "'' is not a valid match type for CORS allow origins");
        } else {
            r.check(op, string_match(o, "corsPolicy.allowOrigins", true));
        }
    }
    for (i, m) in cors.allow_methods.iter().enumerate() {
        if !HTTP_METHODS.contains(&m.as_str()) {
            r.error(
                format!("{path}.allowMethods[{i}]"),
                format!("{m:?} is not a supported HTTP method"),
            );
        }
    }
    for (field, list) in [
        ("allowHeaders", &cors.allow_headers),
        ("exposeHeaders", &cors.expose_headers),
    ] {
        for name in list {
            let checked = if name.is_empty() {
                Err("header name cannot be empty".to_string())
            } else if name != "*" && !name.bytes().all(is_token_char) {
                Err(format!("header name {name} is not a valid header name"))
            } else {
                Ok(())
            };
            r.check(format!("{path}.{field}"), checked);
        }
    }
    if let Some(d) = &cors.max_age {
        r.check(format!("{path}.maxAge"), h::duration(d));
        if d.as_std().subsec_nanos() != 0 {
            r.error(
                format!("{path}.maxAge"),
                "max_age duration is accurate only to seconds precision",
            );
        }
    }
}

fn fault_injection(r: &mut Report, path: &str, fault: &HttpFaultInjection) {
    if fault.abort.is_none() && fault.delay.is_none() {
        r.error(
            path,
            "HTTP fault injection must have an abort and/or a delay",
        );
    }
    if let Some(abort) = &fault.abort {
        let ap = format!("{path}.abort");
        if let Some(p) = &abort.percentage {
            r.check(format!("{ap}.percentage"), h::percentage(p.value));
        }
        let set = h::count_set(&[
            abort.http_status.is_some(),
            abort.grpc_status.is_some(),
            abort.http2_error.is_some(),
        ]);
        if set > 1 {
            // A oneof: istiod cannot decode two.
            r.error(
                &ap,
                "abort must specify exactly one of httpStatus, grpcStatus or http2Error",
            );
        } else if set == 0 {
            r.warn(&ap, "abort configured, but error type not set");
        }
        if let Some(status) = abort.http_status
            && !(200..=600).contains(&status)
        {
            r.error(
                format!("{ap}.httpStatus"),
                format!("HTTP status {status} is not in range 200-599"),
            );
        }
        if let Some(status) = &abort.grpc_status
            && !crate::config::networking::GRPC_STATUS_NAMES.contains(&status.as_str())
        {
            r.error(
                format!("{ap}.grpcStatus"),
                format!("gRPC status {status:?} is not supported. See https://github.com/grpc/grpc/blob/master/doc/statuscodes.md for a list of supported codes, for example 'NOT_FOUND'"),
            );
        }
        if abort.http2_error.is_some() {
            r.error(
                format!("{ap}.http2Error"),
                "HTTP/2 abort fault injection not supported yet",
            );
        }
    }
    if let Some(delay) = &fault.delay {
        let dp = format!("{path}.delay");
        if let Some(p) = &delay.percentage {
            r.check(format!("{dp}.percentage"), h::percentage(p.value));
        }
        match (&delay.fixed_delay, &delay.exponential_delay) {
            (Some(_), Some(_)) => r.error(
                &dp,
                "delay may only set one of fixedDelay or exponentialDelay",
            ),
            (Some(d), None) => r.check(format!("{dp}.fixedDelay"), h::duration(d)),
            (None, Some(d)) => {
                r.check(format!("{dp}.exponentialDelay"), h::duration(d));
                r.error(
                    format!("{dp}.exponentialDelay"),
                    "exponentialDelay not supported yet",
                );
            }
            (None, None) => {}
        }
    }
}

fn http_match(r: &mut Report, path: &str, m: &HttpMatchRequest) {
    // An empty uri prefix matches everything (Envoy allows it); the others do not.
    for (field, sm, empty_prefix_ok) in [
        ("uri", &m.uri, true),
        ("scheme", &m.scheme, false),
        ("method", &m.method, false),
        ("authority", &m.authority, false),
    ] {
        if let Some(sm) = sm {
            r.check(
                format!("{path}.{field}"),
                string_match(sm, field, empty_prefix_ok),
            );
        }
    }
    for (name, sm) in &m.headers {
        let hp = format!("{path}.headers.{name}");
        r.check(&hp, match_header_name(name));
        r.check(hp, string_match(sm, "headers", false));
    }
    for (name, sm) in &m.without_headers {
        let hp = format!("{path}.withoutHeaders.{name}");
        r.check(&hp, match_header_name(name));
        // `regex: "*"` is not a regex there: it means "present".
        if !matches!(sm, StringMatch::Regex(re) if re == "*") {
            r.check(hp, string_match(sm, "withoutHeaders", false));
        }
    }
    for (name, sm) in &m.query_params {
        r.check(
            format!("{path}.queryParams.{name}"),
            string_match(sm, "queryParams", false),
        );
    }
    if m.port != 0 {
        r.check(format!("{path}.port"), h::port(m.port));
    }
    r.check(format!("{path}.sourceLabels"), h::labels(&m.source_labels));
    gateway_names(r, &format!("{path}.gateways"), &m.gateways);
    if !m.source_namespace.is_empty() && !h::is_dns1123_label(&m.source_namespace) {
        r.error(
            format!("{path}.sourceNamespace"),
            format!("sourceNamespace match {} is invalid", m.source_namespace),
        );
    }
}

/// The authority may be rewritten in one place only: `rewrite.authority` or one request header
/// operation on `:authority`/`host`.
fn authority_rewrite(r: &mut Report, path: &str, route: &HttpRoute) {
    let mut current = route
        .rewrite
        .as_ref()
        .map(|rw| rw.authority.clone())
        .unwrap_or_default();
    let Some(ops) = route.headers.as_ref().and_then(|h| h.request.as_ref()) else {
        return;
    };
    for (name, value) in ops.set.iter().chain(&ops.add) {
        if !(name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")) {
            continue;
        }
        if !current.is_empty() {
            r.error(
                path,
                format!("authority header cannot be set multiple times: have {current:?}, attempting to set {value:?}"),
            );
            return;
        }
        current = value.clone();
    }
}

/// istiod's validateStringMatch for route matches (`field` names the match in the message).
fn string_match(sm: &StringMatch, field: &str, empty_prefix_ok: bool) -> Result<(), String> {
    match sm {
        StringMatch::Prefix(p) if p.is_empty() && !empty_prefix_ok => Err(format!(
            "{field:?}: prefix string match should not be empty"
        )),
        StringMatch::Regex(re) if re.is_empty() => Err(format!(
            "{field:?}: regex string match should not be empty"
        )),
        StringMatch::Regex(re) if re.len() > 1024 => Err(format!(
            "{field:?}: regex is too large, max length allowed is 1024"
        )),
        StringMatch::Regex(re) => h::regex(re).map_err(|e| {
            format!(
                "{field:?}: {e}; Istio uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)"
            )
        }),
        _ => Ok(()),
    }
}

/// A header name to match on: a token, a pseudo-header, or a JWT claim (`@request.auth.claims.x`).
fn match_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("header name cannot be empty".into());
    }
    if crate::config::networking::routing_claim(name).is_some()
        || [":method", ":scheme", ":authority", ":path", ":status"].contains(&name)
        || name.bytes().all(is_token_char)
    {
        Ok(())
    } else {
        Err(format!("header name {name} is not a valid header name"))
    }
}

fn http_retry(r: &mut Report, path: &str, retry: &HttpRetry) {
    if retry.attempts < 0 {
        r.error(format!("{path}.attempts"), "attempts cannot be negative");
    }
    if retry.attempts == 0
        && (retry.per_try_timeout.is_some()
            || !retry.retry_on.is_empty()
            || retry.retry_remote_localities.is_some())
    {
        r.error(
            path.to_string(),
            "http retry policy configured when attempts are set to 0 (disabled)",
        );
    }
    if let Some(t) = &retry.per_try_timeout {
        r.check(format!("{path}.perTryTimeout"), h::duration(t));
    }
    if let Some(b) = &retry.backoff {
        r.check(format!("{path}.backoff"), h::duration(b));
    }
    if !retry.retry_on.is_empty() {
        for policy in retry.retry_on.split(',').map(str::trim) {
            let is_status = policy
                .parse::<u32>()
                .is_ok_and(|c| (100..=599).contains(&c));
            if !is_status && !SUPPORTED_RETRY_ON.contains(&policy) {
                r.error(
                    format!("{path}.retryOn"),
                    format!("{policy:?} is not a valid retryOn policy"),
                );
            }
        }
    }
}

fn destination(r: &mut Report, path: &str, d: &Destination) {
    if d.host == "*" {
        r.error(
            format!("{path}.host"),
            format!("invalid destination host {}", d.host),
        );
    } else {
        r.check(format!("{path}.host"), h::wildcard_domain(&d.host));
    }
    if !d.subset.is_empty() && !h::is_dns1123_label(&d.subset) {
        r.error(
            format!("{path}.subset"),
            format!("subset name is invalid: {}", d.subset),
        );
    }
    if let Some(p) = &d.port {
        r.check(format!("{path}.port.number"), h::port(p.number));
    }
}

/// istiod normalises weights that do not sum to 100; only all-zero weights of a split are refused.
fn weights_total(r: &mut Report, path: &str, weights: &[i32]) {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    if weights.len() > 1 && total == 0 {
        r.error(path, "total destination weight = 0");
    }
}

fn weight(w: i32) -> Result<(), String> {
    if w < 0 {
        Err(format!("weight {w} < 0"))
    } else {
        Ok(())
    }
}

fn http_route_destinations(r: &mut Report, path: &str, dests: &[HttpRouteDestination]) {
    for (i, d) in dests.iter().enumerate() {
        let dp = format!("{path}[{i}]");
        match &d.destination {
            Some(dest) => destination(r, &format!("{dp}.destination"), dest),
            None => r.error(format!("{dp}.destination"), "destination is required"),
        }
        headers(r, &format!("{dp}.headers"), d.headers.as_ref());
        r.check(format!("{dp}.weight"), weight(d.weight));
    }
    weights_total(r, path, &dests.iter().map(|d| d.weight).collect::<Vec<_>>());
}

fn route_destinations(r: &mut Report, path: &str, dests: &[RouteDestination]) {
    for (i, d) in dests.iter().enumerate() {
        let dp = format!("{path}[{i}]");
        match &d.destination {
            Some(dest) => destination(r, &format!("{dp}.destination"), dest),
            None => r.error(format!("{dp}.destination"), "destination is required"),
        }
        r.check(format!("{dp}.weight"), weight(d.weight));
    }
    weights_total(r, path, &dests.iter().map(|d| d.weight).collect::<Vec<_>>());
}

/// Gateways route mesh mTLS by the SNI sidecars send, `outbound_.<port>_._.<host>`
/// (`outbound_.<port>_.<subset>_.<host>`); `None` when `sni` is not of that form.
fn generated_sni(sni: &str) -> Option<Result<(), String>> {
    let rest = sni.strip_prefix("outbound_.")?;
    let parts: Vec<&str> = rest.splitn(3, '.').collect();
    let invalid = |label: &str| {
        Err(format!(
            "domain name {sni:?} invalid (label {label:?} invalid). should follow outbound_.<port>_._.<hostname> format"
        ))
    };
    Some(match parts.as_slice() {
        [port, _subset, host] => {
            if !port.starts_with(|c: char| c.is_ascii_digit()) {
                invalid(port)
            } else if !host.starts_with(|c: char| c.is_ascii_alphabetic()) {
                invalid(host)
            } else {
                Ok(())
            }
        }
        _ => invalid(sni),
    })
}

fn tls_route(r: &mut Report, path: &str, route: &TlsRoute, vs: &VirtualService) {
    if route.matches.is_empty() {
        r.error(
            format!("{path}.match"),
            "TLS route must have at least one match condition",
        );
    }
    for (i, m) in route.matches.iter().enumerate() {
        let mp = format!("{path}.match[{i}]");
        if m.sni_hosts.is_empty() {
            r.error(
                format!("{mp}.sniHosts"),
                "TLS match must have at least one SNI host",
            );
        }
        for (j, sni) in m.sni_hosts.iter().enumerate() {
            let sp = format!("{mp}.sniHosts[{j}]");
            // istiod's isGateway: no `mesh` among the gateways (none at all counts too).
            let bound_to_gateway = !vs.gateways.iter().any(|g| g == MESH_GATEWAY);
            let checked = if bound_to_gateway {
                generated_sni(sni).unwrap_or_else(|| h::wildcard_domain(sni))
            } else {
                h::wildcard_domain(sni)
            };
            if let Err(e) = checked {
                if h::ip(sni).is_ok() {
                    r.warn(
                        sp,
                        format!("using an IP address ({sni:?}) goes against SNI spec and most clients do not support this"),
                    );
                } else {
                    r.error(sp, e);
                }
                continue;
            }
            if !vs.hosts.iter().any(|vh| host::subset_of(sni, vh)) {
                r.error(
                    sp,
                    format!(
                        "SNI host {sni:?} is not a compatible subset of any of the virtual service hosts: [{}]",
                        vs.hosts.join(", ")
                    ),
                );
            }
        }
        l4_common(
            r,
            &mp,
            &m.destination_subnets,
            m.port,
            &m.source_labels,
            &m.gateways,
        );
    }
    if route.route.is_empty() {
        r.error(format!("{path}.route"), "TLS route is required");
    }
    route_destinations(r, &format!("{path}.route"), &route.route);
}

fn tcp_route(r: &mut Report, path: &str, route: &TcpRoute) {
    for (i, m) in route.matches.iter().enumerate() {
        let mp = format!("{path}.match[{i}]");
        l4_common(
            r,
            &mp,
            &m.destination_subnets,
            m.port,
            &m.source_labels,
            &m.gateways,
        );
        if !m.source_subnet.is_empty() {
            r.check(format!("{mp}.sourceSubnet"), h::ip_subnet(&m.source_subnet));
        }
    }
    if route.route.is_empty() {
        r.error(format!("{path}.route"), "TCP route is required");
    }
    route_destinations(r, &format!("{path}.route"), &route.route);
}

fn l4_common(
    r: &mut Report,
    path: &str,
    subnets: &[String],
    port: u32,
    source_labels: &std::collections::BTreeMap<String, String>,
    gateways: &[String],
) {
    for (i, s) in subnets.iter().enumerate() {
        r.check(format!("{path}.destinationSubnets[{i}]"), h::ip_subnet(s));
    }
    if port != 0 {
        r.check(format!("{path}.port"), h::port(port));
    }
    r.check(format!("{path}.sourceLabels"), h::labels(source_labels));
    gateway_names(r, &format!("{path}.gateways"), gateways);
}

// ---------------------------------------------------------------------------------------------

pub fn destination_rule(r: &mut Report, namespace: &str, dr: &DestinationRule) {
    r.check("spec.host", h::wildcard_domain(&dr.host));
    if let Some(tp) = &dr.traffic_policy {
        traffic_policy(r, "spec.trafficPolicy", tp);
    }
    let mut names = HashSet::new();
    for (i, subset) in dr.subsets.iter().enumerate() {
        let sp = format!("spec.subsets[{i}]");
        if subset.name.is_empty() {
            r.error(format!("{sp}.name"), "subset name cannot be empty");
        } else if !h::is_dns1123_label(&subset.name) {
            r.error(
                format!("{sp}.name"),
                format!("subset name is invalid: {}", subset.name),
            );
        } else if !names.insert(subset.name.as_str()) {
            r.error(
                format!("{sp}.name"),
                format!("duplicate subset names: {}", subset.name),
            );
        }
        r.check(format!("{sp}.labels"), h::labels(&subset.labels));
        if let Some(tp) = &subset.traffic_policy {
            traffic_policy(r, &format!("{sp}.trafficPolicy"), tp);
        }
    }
    r.check(
        "spec.workloadSelector",
        h::workload_selector(dr.workload_selector.as_ref()),
    );
    if dr
        .workload_selector
        .as_ref()
        .is_some_and(|s| s.match_labels.is_empty())
    {
        r.warn(
            "spec.workloadSelector",
            "workload selector specified without labels",
        );
    }
    r.check(
        "spec.exportTo",
        h::export_to(namespace, &dr.export_to, false),
    );
    // A rule for selected workloads stays in their namespace.
    if dr.workload_selector.is_some() && !dr.export_to.is_empty() {
        let targets: HashSet<&str> = dr
            .export_to
            .iter()
            .map(|e| if e == "." { namespace } else { e.as_str() })
            .collect();
        if !targets.contains(namespace) {
            r.error(
                "spec.exportTo",
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            );
        } else if targets.len() > 1 {
            r.error(
                "spec.exportTo",
                "destination rule with workload selector cannot have multiple entries in exportTo",
            );
        }
    }
}

fn traffic_policy(r: &mut Report, path: &str, tp: &TrafficPolicy) {
    if tp.outlier_detection.is_none()
        && tp.connection_pool.is_none()
        && tp.load_balancer.is_none()
        && tp.tls.is_none()
        && tp.port_level_settings.is_empty()
        && tp.tunnel.is_none()
        && tp.proxy_protocol.is_none()
        && tp.retry_budget.is_none()
    {
        r.error(path, "traffic policy must have at least one field");
        return;
    }
    if tp.tunnel.is_some() && tp.proxy_protocol.is_some() {
        r.error(path, "tunnel and proxyProtocol must not be set together");
        return;
    }
    policy_parts(
        r,
        path,
        tp.outlier_detection.as_ref(),
        tp.connection_pool.as_ref(),
        tp.load_balancer.as_ref(),
        tp.tls.as_ref(),
    );
    for (i, pl) in tp.port_level_settings.iter().enumerate() {
        let pp = format!("{path}.portLevelSettings[{i}]");
        if pl.port.is_none() {
            r.error(
                format!("{pp}.port"),
                "portTrafficPolicy must have valid port",
            );
        }
        if pl.outlier_detection.is_none()
            && pl.connection_pool.is_none()
            && pl.load_balancer.is_none()
            && pl.tls.is_none()
        {
            r.error(&pp, "port traffic policy must have at least one field");
            continue;
        }
        policy_parts(
            r,
            &pp,
            pl.outlier_detection.as_ref(),
            pl.connection_pool.as_ref(),
            pl.load_balancer.as_ref(),
            pl.tls.as_ref(),
        );
    }
    if let Some(t) = &tp.tunnel {
        let tp = format!("{path}.tunnel");
        if !matches!(t.protocol.as_str(), "" | "CONNECT" | "POST") {
            r.error(
                format!("{tp}.protocol"),
                "tunnel protocol must be \"CONNECT\" or \"POST\"",
            );
        }
        if let (Err(fqdn), Err(ip)) = (h::fqdn(&t.target_host), h::ip(&t.target_host)) {
            r.error(
                format!("{tp}.targetHost"),
                format!("tunnel target host must be valid FQDN or IP address: {fqdn}; {ip}"),
            );
        }
        if let Err(e) = h::port(t.target_port) {
            r.error(
                format!("{tp}.targetPort"),
                format!("tunnel target port is invalid: {e}"),
            );
        }
    }
}

fn policy_parts(
    r: &mut Report,
    path: &str,
    outlier: Option<&OutlierDetection>,
    pool: Option<&ConnectionPoolSettings>,
    lb: Option<&LoadBalancerSettings>,
    tls: Option<&ClientTlsSettings>,
) {
    if let Some(o) = outlier {
        let op = format!("{path}.outlierDetection");
        if let Some(d) = &o.base_ejection_time {
            r.check(format!("{op}.baseEjectionTime"), h::duration(d));
        }
        if o.consecutive_errors != 0 {
            r.warn(
                format!("{op}.consecutiveErrors"),
                "outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead",
            );
        }
        if !o.split_external_local_origin_errors
            && o.consecutive_local_origin_failures.is_some_and(|n| n > 0)
        {
            r.error(
                &op,
                "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
            );
        }
        if let Some(d) = &o.interval {
            r.check(format!("{op}.interval"), h::duration(d));
        }
        r.check(
            format!("{op}.maxEjectionPercent"),
            h::percent(o.max_ejection_percent),
        );
        r.check(
            format!("{op}.minHealthPercent"),
            h::percent(o.min_health_percent),
        );
    }
    if let Some(p) = pool {
        connection_pool(r, &format!("{path}.connectionPool"), p);
    }
    if let Some(lb) = lb {
        load_balancer(r, &format!("{path}.loadBalancer"), lb, outlier);
    }
    if let Some(t) = tls {
        client_tls(r, &format!("{path}.tls"), t);
    }
}

fn connection_pool(r: &mut Report, path: &str, pool: &ConnectionPoolSettings) {
    if pool.http.is_none() && pool.tcp.is_none() {
        r.error(path, "connection pool must have at least one field");
        return;
    }
    if let Some(http) = &pool.http {
        let hp = format!("{path}.http");
        for (field, v, msg) in [
            (
                "http1MaxPendingRequests",
                http.http1_max_pending_requests,
                "http1 max pending requests must be non-negative",
            ),
            (
                "http2MaxRequests",
                http.http2_max_requests,
                "http2 max requests must be non-negative",
            ),
            (
                "maxRequestsPerConnection",
                http.max_requests_per_connection,
                "max requests per connection must be non-negative",
            ),
            (
                "maxRetries",
                http.max_retries,
                "max retries must be non-negative",
            ),
            (
                "maxConcurrentStreams",
                http.max_concurrent_streams,
                "max concurrent streams must be non-negative",
            ),
        ] {
            if v < 0 {
                r.error(format!("{hp}.{field}"), msg);
            }
        }
        if let Some(d) = &http.idle_timeout {
            r.check(format!("{hp}.idleTimeout"), h::duration(d));
        }
        if http.h2_upgrade_policy == Some(H2UpgradePolicy::UPGRADE) && http.use_client_protocol {
            r.error(
                &hp,
                "use client protocol must not be true when H2UpgradePolicy is UPGRADE",
            );
        }
    }
    if let Some(tcp) = &pool.tcp {
        let tp = format!("{path}.tcp");
        if tcp.max_connections < 0 {
            r.error(
                format!("{tp}.maxConnections"),
                "max connections must be non-negative",
            );
        }
        for (field, d) in [
            ("connectTimeout", &tcp.connect_timeout),
            ("maxConnectionDuration", &tcp.max_connection_duration),
            // An idle timeout of 0 means "never" there.
            (
                "idleTimeout",
                &tcp.idle_timeout.filter(|d| d.as_std().as_millis() != 0),
            ),
        ] {
            if let Some(d) = d {
                r.check(format!("{tp}.{field}"), h::duration(d));
            }
        }
        if let Some(ka) = &tcp.tcp_keepalive {
            for (field, d) in [("time", &ka.time), ("interval", &ka.interval)] {
                if let Some(d) = d {
                    r.check(format!("{tp}.tcpKeepalive.{field}"), h::duration(d));
                }
            }
        }
    }
}

fn load_balancer(
    r: &mut Report,
    path: &str,
    lb: &LoadBalancerSettings,
    outlier: Option<&OutlierDetection>,
) {
    if lb.simple.is_some() && lb.consistent_hash.is_some() {
        r.error(path, "only one of simple or consistentHash may be set");
    }
    if let Some(ch) = &lb.consistent_hash {
        let cp = format!("{path}.consistentHash");
        let keys = [
            ch.http_header_name.is_some(),
            ch.http_cookie.is_some(),
            ch.use_source_ip.is_some(),
            ch.http_query_parameter_name.is_some(),
        ];
        if h::count_set(&keys) > 1 {
            r.error(&cp, "only one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName may be set");
        }
        if let Some(cookie) = &ch.http_cookie {
            if cookie.name.is_empty() {
                r.error(
                    format!("{cp}.httpCookie.name"),
                    "name required for HttpCookie",
                );
            }
            let mut names = HashSet::new();
            for attr in &cookie.attributes {
                if attr.name.is_empty() {
                    r.error(
                        format!("{cp}.httpCookie.attributes"),
                        "cookie attribute name cannot be empty",
                    );
                } else if !names.insert(attr.name.as_str()) {
                    r.error(
                        format!("{cp}.httpCookie.attributes"),
                        format!("duplicate cookie attribute name: {}", attr.name),
                    );
                }
            }
        }
        if ch.minimum_ring_size != 0 {
            r.warn(
                format!("{cp}.minimumRingSize"),
                "consistent hash MinimumRingSize is deprecated, use ConsistentHashLB's RingHash configuration instead",
            );
            if ch.ring_hash.is_some() || ch.maglev.is_some() {
                r.error(
                    &cp,
                    "only one of MinimumRingSize or Maglev/Ringhash can be specified",
                );
            }
        }
        if ch.ring_hash.is_some() && ch.maglev.is_some() {
            r.error(&cp, "only one of ringHash or maglev may be set");
        }
        if let Some(ml) = &ch.maglev {
            let mp = format!("{cp}.maglev.tableSize");
            if ml.table_size == 0 {
                r.error(&mp, "tableSize must be set for maglev");
            }
            if ml.table_size >= 5_000_011 {
                r.error(&mp, "tableSize must be less than 5000011 for maglev");
            }
            if !is_prime(ml.table_size) {
                r.error(&mp, "tableSize must be a prime number for maglev");
            }
        }
    }
    if let Some(l) = &lb.locality_lb_setting {
        r.check(format!("{path}.localityLbSetting"), locality_lb_setting(l));
        if (!l.failover.is_empty() || !l.failover_priority.is_empty()) && outlier.is_none() {
            r.warn(
                format!("{path}.localityLbSetting"),
                "outlier detection policy must be provided for failover",
            );
        }
    }
    if let Some(w) = &lb.warmup_duration_secs {
        r.check(format!("{path}.warmupDurationSecs"), h::duration(w));
    }
    if let Some(warm) = &lb.warmup {
        let wp = format!("{path}.warmup");
        match &warm.duration {
            None => r.error(format!("{wp}.duration"), "duration is required"),
            Some(d) => r.check(format!("{wp}.duration"), h::duration(d)),
        }
        if warm.minimum_percent.is_some_and(|p| p > 100.0) {
            r.error(
                format!("{wp}.minimumPercent"),
                "minimumPercent value should be less than or equal to 100",
            );
        }
        if warm.aggression.is_some_and(|a| a < 1.0) {
            r.error(
                format!("{wp}.aggression"),
                "aggression should be greater than or equal to 1",
            );
        }
    }
}

/// istiod's ValidateTLS for DestinationRule `tls` (ISTIO_MUTUAL takes anything: the mesh's
/// certificates are used and the rest ignored).
fn client_tls(r: &mut Report, path: &str, tls: &ClientTlsSettings) {
    if tls.insecure_skip_verify == Some(true) {
        match tls.mode {
            ClientTlsMode::SIMPLE
                if !tls.ca_certificates.is_empty()
                    || !tls.credential_name.is_empty()
                    || !tls.subject_alt_names.is_empty() =>
            {
                r.error(
                    path,
                    "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
                );
            }
            ClientTlsMode::MUTUAL
                if !tls.ca_certificates.is_empty() || !tls.subject_alt_names.is_empty() =>
            {
                r.error(
                    path,
                    "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true",
                );
            }
            _ => {}
        }
    }
    let originating = matches!(tls.mode, ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL);
    if originating && !tls.credential_name.is_empty() {
        if !tls.client_certificate.is_empty()
            || !tls.ca_certificates.is_empty()
            || !tls.private_key.is_empty()
            || !tls.ca_crl.is_empty()
        {
            r.error(
                path,
                "cannot specify client certificates or CA certificate or CA CRL If credentialName is set",
            );
        }
        return;
    }
    if tls.mode == ClientTlsMode::MUTUAL {
        if tls.client_certificate.is_empty() {
            r.error(
                format!("{path}.clientCertificate"),
                "client certificate required for mutual tls",
            );
        }
        if tls.private_key.is_empty() {
            r.error(
                format!("{path}.privateKey"),
                "private key required for mutual tls",
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------

pub fn gateway(r: &mut Report, name: &str, gw: &Gateway) {
    if !h::is_dns1123_label(name) {
        r.error("metadata.name", format!("invalid gateway name: {name:?}"));
    }
    if gw.servers.is_empty() {
        r.error("spec.servers", "gateway must have at least one server");
    }
    let mut port_names = HashSet::new();
    for (i, server) in gw.servers.iter().enumerate() {
        let sp = format!("spec.servers[{i}]");
        gateway_server(r, &sp, server);
        if let Some(p) = &server.port
            && !port_names.insert(p.name.as_str())
        {
            r.error(
                format!("{sp}.port.name"),
                format!(
                    "port names in servers must be unique: duplicate name {}",
                    p.name
                ),
            );
        }
        if let Some(p) = &server.port
            && !h::protocol_is_http(&p.protocol)
            && server.tls.as_ref().is_some_and(|t| t.https_redirect)
        {
            r.warn(
                format!("{sp}.tls.httpsRedirect"),
                "tls.httpsRedirect should only be used with http servers",
            );
        }
    }
}

fn gateway_server(r: &mut Report, path: &str, server: &Server) {
    if server.hosts.is_empty() {
        r.error(
            format!("{path}.hosts"),
            "server config must contain at least one host",
        );
    }
    for (i, hostname) in server.hosts.iter().enumerate() {
        namespace_slash_host(r, &format!("{path}.hosts[{i}]"), hostname, true);
    }
    let Some(port) = &server.port else {
        r.error(format!("{path}.port"), "port is required");
        return;
    };
    let mut port_ok = true;
    // A gateway server must say its protocol: no sniffing there.
    if port.protocol.is_empty() || h::protocol(&port.protocol).is_err() {
        r.error(
            format!("{path}.port.protocol"),
            format!(
                "invalid protocol {:?}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP",
                port.protocol
            ),
        );
        port_ok = false;
    }
    // Port 0 only with a Unix-socket bind.
    if (port.number > 0 || !server.bind.starts_with("unix://"))
        && let Err(e) = h::port(port.number)
    {
        r.error(format!("{path}.port.number"), e);
    }
    if port.target_port > 0 {
        r.error(
            format!("{path}.port.targetPort"),
            "targetPort has no impact on Gateways",
        );
        port_ok = false;
    }
    if port.name.is_empty() {
        r.error(format!("{path}.port.name"), "port name must be set");
        port_ok = false;
    }
    if let Some(sock) = server.bind.strip_prefix("unix://") {
        r.check(format!("{path}.bind"), h::unix_address(sock));
        if port.number != 0 {
            r.error(
                format!("{path}.bind"),
                "port number must be 0 for unix domain socket",
            );
        }
    } else if !server.bind.is_empty() {
        r.check(format!("{path}.bind"), h::ip(&server.bind));
    }
    if let Some(tls) = &server.tls {
        server_tls(r, &format!("{path}.tls"), tls);
    }
    if port_ok {
        let is_tls = h::protocol_is_tls(&port.protocol);
        match &server.tls {
            None if is_tls => r.error(
                path,
                "server must have TLS settings for HTTPS/TLS protocols",
            ),
            Some(tls) if !is_tls => {
                if h::protocol_is_http(&port.protocol) {
                    let redirect_only = tls.https_redirect
                        && tls.ca_certificates.is_empty()
                        && tls.private_key.is_empty()
                        && tls.server_certificate.is_empty();
                    if !redirect_only {
                        r.error(
                            path,
                            "server cannot have TLS settings for plain text HTTP ports",
                        );
                    }
                } else {
                    r.error(
                        path,
                        "server cannot have TLS settings for non HTTPS/TLS ports",
                    );
                }
            }
            _ => {}
        }
    }
}

/// A cipher name, `ALL`, or an expression (`-…`, `+…`) istiod lets through unparsed.
fn cipher_suite_valid(cs: &str) -> bool {
    cs.is_empty()
        || cs == "ALL"
        || !cs.starts_with(|c: char| c.is_alphanumeric())
        || crate::config::networking::CIPHER_SUITES.contains(&cs)
}

/// istiod's validateTLSOptions for a server (gateways, Sidecar ingress).
fn server_tls(r: &mut Report, path: &str, tls: &ServerTlsSettings) {
    if matches!(
        tls.min_protocol_version,
        Some(TlsProtocol::TLSV1_0 | TlsProtocol::TLSV1_1)
    ) && tls.cipher_suites.is_empty()
    {
        r.warn(
            path,
            "TLS version below TLSV1_2 require setting compatible ciphers as by default they no longer include compatible ciphers.",
        );
    }
    let (mut invalid, mut seen, mut duplicate) = (Vec::new(), HashSet::new(), Vec::new());
    for cs in &tls.cipher_suites {
        if !cipher_suite_valid(cs) {
            invalid.push(cs.as_str());
        } else if !seen.insert(cs.as_str()) {
            duplicate.push(cs.as_str());
        }
    }
    for (list, what) in [(&mut invalid, "invalid"), (&mut duplicate, "duplicate")] {
        if !list.is_empty() {
            list.sort();
            list.dedup();
            r.warn(
                format!("{path}.cipherSuites"),
                format!("ignoring {what} cipher suites: [{}]", list.join(" ")),
            );
        }
    }
    // Expressions istiod lets through but Envoy could reject are not sent (never NACKed).
    let sent = crate::config::networking::envoy_cipher_suites(&tls.cipher_suites);
    let mut unsent: Vec<&str> = seen
        .iter()
        .copied()
        .filter(|cs| !cs.is_empty() && !sent.iter().any(|s| s == cs))
        .collect();
    if !unsent.is_empty() {
        unsent.sort();
        r.warn(
            format!("{path}.cipherSuites"),
            format!(
                "not sent to Envoy, which may reject them: [{}] (Rudder passes on cipher names, ALL, and names behind -, + or ! or in [a|b] groups)",
                unsent.join(" ")
            ),
        );
    }
    if tls.mode == ServerTlsMode::ISTIO_MUTUAL {
        for (set, what) in [
            (!tls.server_certificate.is_empty(), "server certificate"),
            (!tls.private_key.is_empty(), "private key"),
            (!tls.ca_certificates.is_empty(), "CA bundle"),
            (!tls.tls_certificates.is_empty(), "tlsCertificates"),
            (!tls.credential_name.is_empty(), "credentialName"),
            (!tls.credential_names.is_empty(), "credentialNames"),
        ] {
            if set {
                r.error(
                    path,
                    format!("ISTIO_MUTUAL TLS cannot have associated {what}"),
                );
            }
        }
        return;
    }
    let has_certificates = !tls.ca_crl.is_empty()
        || !tls.server_certificate.is_empty()
        || !tls.private_key.is_empty()
        || !tls.ca_certificates.is_empty()
        || !tls.tls_certificates.is_empty()
        || !tls.credential_name.is_empty()
        || !tls.credential_names.is_empty();
    if matches!(
        tls.mode,
        ServerTlsMode::PASSTHROUGH | ServerTlsMode::AUTO_PASSTHROUGH
    ) && has_certificates
    {
        r.warn(
            path,
            format!(
                "{:?} mode does not use certificates, they will be ignored",
                tls.mode
            ),
        );
    }
    let sources = h::count_set(&[
        !tls.server_certificate.is_empty() && !tls.private_key.is_empty(),
        !tls.credential_name.is_empty(),
        !tls.credential_names.is_empty(),
        !tls.tls_certificates.is_empty(),
    ]);
    if sources > 1 {
        r.error(
            path,
            "only one of credential_name, credential_names, server_certificate/private_key, tls_certificates should be specified",
        );
    }
    let terminating = matches!(
        tls.mode,
        ServerTlsMode::SIMPLE | ServerTlsMode::MUTUAL | ServerTlsMode::OPTIONAL_MUTUAL
    );
    if terminating && (!tls.credential_name.is_empty() || !tls.credential_names.is_empty()) {
        // Fetched over SDS: the files are not needed.
        return;
    }
    if terminating {
        let prefix = if tls.mode == ServerTlsMode::SIMPLE {
            "SIMPLE TLS"
        } else {
            if tls.ca_certificates.is_empty() {
                r.error(path, "MUTUAL TLS requires a client CA bundle");
            }
            "MUTUAL TLS"
        };
        if tls.tls_certificates.len() > 2 {
            r.warn(
                path,
                format!("{prefix} can support up to 2 server certificates"),
            );
        }
        let pairs: Vec<(&str, &str)> = if tls.tls_certificates.is_empty() {
            vec![(&tls.server_certificate, &tls.private_key)]
        } else {
            tls.tls_certificates
                .iter()
                .map(|c| (c.server_certificate.as_str(), c.private_key.as_str()))
                .collect()
        };
        for (cert, key) in pairs {
            if cert.is_empty() {
                r.error(path, format!("{prefix} requires a server certificate"));
            }
            if key.is_empty() {
                r.error(path, format!("{prefix} requires a private key"));
            }
        }
    }
    if !tls.ca_crl.is_empty() {
        if !tls.credential_name.is_empty() {
            r.error(
                path,
                "CRL is not supported with credentialName. CRL has to be specified in the credential",
            );
        }
        if tls.mode == ServerTlsMode::SIMPLE {
            r.error(path, "CRL is not supported with SIMPLE TLS");
        }
    }
}

/// `namespace/dnsName` hosts of Sidecars and Gateways (gateways also take a bare host or an IP).
fn namespace_slash_host(r: &mut Report, path: &str, hostname: &str, is_gateway: bool) {
    let Some((ns, name)) = hostname.split_once('/') else {
        if is_gateway {
            host_part(r, path, hostname, true);
        } else {
            r.error(path, "host must be of form namespace/dnsName");
        }
        return;
    };
    if ns.is_empty() || name.is_empty() {
        r.error(
            path,
            "config namespace and dnsName in host entry cannot be empty",
        );
    }
    // Sidecars may exclude a namespace with `~` (`~ns/*`); gateways may not.
    let ns_name = if is_gateway {
        ns
    } else {
        ns.strip_prefix('~').unwrap_or(ns)
    };
    if !["", "*", "."].contains(&ns_name) && !h::is_dns1123_label(ns_name) {
        let what = if is_gateway { "gateway" } else { "sidecar" };
        r.error(path, format!("invalid namespace value {ns:?} in {what}"));
    }
    host_part(r, path, name, is_gateway);
}

fn host_part(r: &mut Report, path: &str, hostname: &str, is_gateway: bool) {
    if hostname != "*" && !hostname.contains('.') {
        r.error(path, "short names (non FQDN) are not allowed");
    }
    if let Err(e) = h::wildcard_domain(hostname)
        && !(is_gateway && h::ip(hostname).is_ok())
    {
        r.error(path, e);
    }
    r.check(path, h::partial_wildcard(hostname));
}

// ---------------------------------------------------------------------------------------------

/// `labels`: the object's, for `istio.io/use-waypoint`.
pub fn service_entry(
    r: &mut Report,
    namespace: &str,
    labels: &std::collections::BTreeMap<String, String>,
    se: &ServiceEntry,
) {
    if let Some(sel) = &se.workload_selector {
        r.check("spec.workloadSelector", h::label_selector(Some(sel)));
        if sel.labels.is_empty() {
            r.warn(
                "spec.workloadSelector",
                "service entry: workload selector specified without labels, will be applied to all services in namespace",
            );
        }
        if !se.endpoints.is_empty() {
            r.error(
                "spec",
                "only one of WorkloadSelector or Endpoints is allowed in Service Entry",
            );
        }
    }
    if se.hosts.is_empty() {
        r.error("spec.hosts", "service entry must have at least one host");
    }
    for (i, hostname) in se.hosts.iter().enumerate() {
        let hp = format!("spec.hosts[{i}]");
        if hostname == "*" {
            r.error(hp, "invalid host *");
        } else {
            r.check(hp.clone(), h::wildcard_domain(hostname));
            if se.resolution != Resolution::DYNAMIC_DNS
                && hostname.contains('*')
                && !hostname.starts_with("*.")
                && hostname != "*"
            {
                r.warn(hp, format!("partial wildcard {hostname:?} not allowed"));
            }
        }
    }
    let mut cidr = false;
    for (i, addr) in se.addresses.iter().enumerate() {
        cidr |= addr.contains('/');
        r.check(format!("spec.addresses[{i}]"), h::ip_subnet(addr));
    }
    if cidr && !matches!(se.resolution, Resolution::NONE | Resolution::STATIC) {
        r.error(
            "spec.addresses",
            "CIDR addresses are allowed only for NONE/STATIC resolution types",
        );
    }
    let mut names = HashSet::new();
    let mut numbers = HashSet::new();
    for (i, p) in se.ports.iter().enumerate() {
        let pp = format!("spec.ports[{i}]");
        if !names.insert(p.name.as_str()) {
            r.error(
                format!("{pp}.name"),
                format!("service entry port name {:?} already defined", p.name),
            );
        }
        if !numbers.insert(p.number) {
            r.error(
                format!("{pp}.number"),
                format!("service entry port {} already defined", p.number),
            );
        }
        if p.target_port != 0 {
            r.check(format!("{pp}.targetPort"), h::port(p.target_port));
        }
        if se.addresses.is_empty()
            && !se.auto_allocates(labels)
            && (p.protocol.is_empty() || p.protocol.eq_ignore_ascii_case("TCP"))
        {
            r.warn(
                pp.clone(),
                "addresses are required for ports serving TCP (or unset) protocol when IP Autoallocation is not enabled",
            );
        }
        r.check(format!("{pp}.name"), h::port_name(&p.name));
        r.check(format!("{pp}.protocol"), h::protocol(&p.protocol));
        r.check(format!("{pp}.number"), h::port(p.number));
    }
    let is = |p: &str, set: &[&str]| set.iter().any(|k| k.eq_ignore_ascii_case(p));
    match se.resolution {
        Resolution::NONE => {
            if !se.endpoints.is_empty() {
                r.error(
                    "spec.endpoints",
                    "no endpoints should be provided for resolution type none",
                );
            }
            if se.workload_selector.is_some() {
                r.warn(
                    "spec.workloadSelector",
                    "workloadSelector should not be set when resolution mode is NONE",
                );
            }
        }
        Resolution::STATIC => {
            for (i, ep) in se.endpoints.iter().enumerate() {
                workload_entry_in(r, &format!("spec.endpoints[{i}]"), ep, Some(&names), false);
            }
        }
        Resolution::DNS | Resolution::DNS_ROUND_ROBIN => {
            let mode = format!("{:?}", se.resolution);
            if se.endpoints.is_empty()
                && let Some(e) = se.hosts.iter().find_map(|hn| h::fqdn(hn).err())
            {
                r.error(
                    "spec.hosts",
                    format!("hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode {mode}, {e}"),
                );
            }
            if se.resolution == Resolution::DNS_ROUND_ROBIN && se.endpoints.len() > 1 {
                r.error(
                    "spec.endpoints",
                    format!("there must only be 0 or 1 endpoint for resolution mode {mode}"),
                );
            }
            for (i, ep) in se.endpoints.iter().enumerate() {
                let ep_path = format!("spec.endpoints[{i}]");
                if h::ip(&ep.address).is_err() && h::fqdn(&ep.address).is_err() {
                    r.error(
                        format!("{ep_path}.address"),
                        format!(
                            "endpoint address {:?} is not a valid FQDN or an IP address",
                            ep.address
                        ),
                    );
                }
                r.check(format!("{ep_path}.labels"), h::labels(&ep.labels));
                for (name, port) in &ep.ports {
                    if !names.contains(name.as_str()) {
                        r.error(
                            format!("{ep_path}.ports.{name}"),
                            format!("endpoint port {port} is not defined by the service entry"),
                        );
                    }
                    r.check(format!("{ep_path}.ports.{name}"), h::port_name(name));
                    r.check(format!("{ep_path}.ports.{name}"), h::port(*port));
                }
            }
            if !se.addresses.is_empty()
                && se.hosts.len() > 1
                && se
                    .ports
                    .iter()
                    // istiod's IsTCP: TLS-based protocols too, and not an unset protocol.
                    .any(|p| {
                        is(
                            &p.protocol,
                            &["TCP", "HTTPS", "TLS", "MYSQL", "MONGO", "REDIS"],
                        )
                    })
            {
                r.warn(
                    "spec.hosts",
                    "service entry can not have more than one host specified simultaneously with address and tcp port",
                );
            }
        }
        Resolution::DYNAMIC_DNS => {
            let mode = "DYNAMIC_DNS";
            if se.hosts.is_empty() {
                r.error(
                    "spec.hosts",
                    format!(
                        "at least one wildcard host must be provided for resolution type {mode}"
                    ),
                );
            }
            if se.hosts.iter().any(|hn| !hn.starts_with('*')) {
                r.error(
                    "spec.hosts",
                    format!("host must be wildcarded for resolution mode {mode}"),
                );
            }
            if !se.addresses.is_empty() {
                r.error(
                    "spec.addresses",
                    format!("addresses cannot be set for resolution type {mode}. HTTP route domains will only be generatedfrom the hosts field values"),
                );
            }
            if !se.endpoints.is_empty() {
                r.error(
                    "spec.endpoints",
                    format!("endpoints cannot be set for resolution type {mode}. Destination IP address determined from hostsfield values"),
                );
            }
            if se
                .ports
                .iter()
                .any(|p| !is(&p.protocol, &["HTTP", "TLS", "GRPC", "HTTP2"]))
            {
                r.error(
                    "spec.ports",
                    format!("only HTTP, TLS, GRPC, and HTTP2 protocols are supported for resolution type {mode}"),
                );
            }
            // MESH_INTERNAL works with sidecars only: a waypoint cannot resolve it (istiod).
            let waypoint = labels
                .get("istio.io/use-waypoint")
                .is_some_and(|w| !w.is_empty() && !w.eq_ignore_ascii_case("none"));
            if se.location == Location::MESH_INTERNAL && waypoint {
                r.error(
                    "spec.location",
                    format!("location MESH_INTERNAL with resolution type {mode} is not supported when using waypoints"),
                );
            }
        }
    }
    // Plain TCP cannot tell hosts apart, unless resolution NONE ignores them.
    if se.resolution != Resolution::NONE
        && se.hosts.len() > 1
        && se
            .ports
            .iter()
            .any(|p| !h::protocol_is_http(&p.protocol) && !h::protocol_is_tls(&p.protocol))
    {
        r.error(
            "spec.ports",
            "multiple hosts provided with non-HTTP, non-TLS ports",
        );
    }
    r.check(
        "spec.exportTo",
        h::export_to(namespace, &se.export_to, true),
    );
}

/// A WorkloadEntry object (addresses may be IPs, FQDNs or Unix sockets).
pub fn workload_entry(r: &mut Report, path: &str, we: &WorkloadEntry, _in_service_entry: bool) {
    workload_entry_in(r, path, we, None, true);
}

/// istiod's WorkloadEntry rule, for an object (`service_ports` none) or a STATIC ServiceEntry's
/// endpoint (its ports must be the ServiceEntry's, and its address an IP or a Unix socket).
fn workload_entry_in(
    r: &mut Report,
    path: &str,
    we: &WorkloadEntry,
    service_ports: Option<&HashSet<&str>>,
    allow_fqdn: bool,
) {
    let addr = we.address.as_str();
    let ap = format!("{path}.address");
    if addr.is_empty() {
        if we.network.is_empty() {
            r.error(ap, "address is required");
            return;
        }
        r.warn(
            ap.clone(),
            format!("address is unset with network {:?}", we.network),
        );
    }
    let unix = addr.starts_with("unix://");
    if let Some(sock) = addr.strip_prefix("unix://") {
        r.check(ap.clone(), h::unix_address(sock));
        if !we.ports.is_empty() {
            r.error(
                format!("{path}.ports"),
                format!("unix endpoint {addr} must not include ports"),
            );
        }
    } else if !addr.is_empty() && h::ip(addr).is_err() {
        if !allow_fqdn {
            r.error(
                ap.clone(),
                format!("endpoint address {addr:?} is not a valid IP address"),
            );
        } else if h::fqdn(addr).is_err() {
            r.error(
                ap.clone(),
                format!("endpoint address {addr:?} is not a valid FQDN or an IP address"),
            );
        }
    }
    for (name, port) in &we.ports {
        let pp = format!("{path}.ports.{name}");
        if service_ports.is_some_and(|sp| !sp.contains(name.as_str())) {
            r.error(
                pp.clone(),
                format!("endpoint port {port} is not defined by the service entry"),
            );
        }
        r.check(pp.clone(), h::port_name(name));
        r.check(pp, h::port(*port));
    }
    r.check(format!("{path}.labels"), h::labels(&we.labels));
    if unix && service_ports.is_some_and(|sp| sp.len() != 1) {
        r.error(
            path.to_string(),
            "exactly 1 service port required for unix endpoints",
        );
    }
}

/// istiod checks a WorkloadGroup's labels and probe only: the template's address and ports are
/// filled in when workloads register.
pub fn workload_group(r: &mut Report, wg: &WorkloadGroup) {
    if wg.template.is_none() {
        r.error("spec.template", "template is required");
        return;
    }
    if let Some(meta) = &wg.metadata
        && let Err(e) = h::labels(&meta.labels)
    {
        r.error("spec.metadata.labels", format!("invalid labels: {e}"));
        return;
    }
    let Some(p) = &wg.probe else {
        return;
    };
    for (field, v) in [
        ("periodSeconds", p.period_seconds),
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        if v < 0 {
            r.error(
                format!("spec.probe.{field}"),
                format!("{field} must be non-negative"),
            );
        }
    }
    let methods = h::count_set(&[
        p.http_get.is_some(),
        p.tcp_socket.is_some(),
        p.exec.is_some(),
        p.grpc.is_some(),
    ]);
    if methods > 1 {
        // A oneof: istiod cannot even decode two.
        r.error(
            "spec.probe",
            "probe must specify exactly one of httpGet, tcpSocket or exec",
        );
        return;
    }
    if let Some(hg) = &p.http_get {
        r.check("spec.probe.httpGet.port", h::port(hg.port));
        if !hg.scheme.is_empty() && hg.scheme != "HTTPS" && hg.scheme != "HTTP" {
            r.error(
                "spec.probe.httpGet.scheme",
                "httpGet.scheme must be one of \"HTTPS\", \"HTTP\"",
            );
        }
        for (i, header) in hg.http_headers.iter().enumerate() {
            r.check(
                format!("spec.probe.httpGet.httpHeaders[{i}].name"),
                probe_header_name(&header.name),
            );
        }
    } else if let Some(ts) = &p.tcp_socket {
        r.check("spec.probe.tcpSocket.port", h::port(ts.port));
    } else if let Some(ex) = &p.exec {
        if ex.command.is_empty() {
            r.error("spec.probe.exec.command", "exec.command is required");
        }
    } else {
        // istiod knows httpGet, tcpSocket and exec; a gRPC or empty probe is refused.
        r.error(
            "spec.probe",
            "unknown health check method: set one of httpGet, tcpSocket or exec",
        );
    }
}

/// istiod's ValidateLocalityLbSetting (the failover warning is the caller's).
fn locality_lb_setting(l: &LocalityLoadBalancerSetting) -> Result<(), String> {
    if !l.distribute.is_empty() && !l.failover.is_empty() {
        return Err("can not simultaneously specify 'distribute' and 'failover'".into());
    }
    if !l.failover.is_empty()
        && let Some(label) = l.failover_priority.iter().find(|p| {
            matches!(
                p.as_str(),
                "topology.kubernetes.io/region"
                    | "topology.kubernetes.io/zone"
                    | "topology.istio.io/subzone"
            )
        })
    {
        return Err(format!(
            "can not simultaneously set 'failover' and topology label '{label}' in 'failover_priority'"
        ));
    }
    let mut sources = Vec::new();
    for d in &l.distribute {
        sources.push(d.from.as_str());
        if d.to.values().any(|w| !(1..=100).contains(w)) {
            return Err("locality weight must be in range [1, 100]".into());
        }
        let total: u64 = d.to.values().map(|w| u64::from(*w)).sum();
        if total != 100 {
            return Err(format!("total locality weight {total} != 100"));
        }
        localities(&d.to.keys().map(String::as_str).collect::<Vec<_>>())?;
    }
    localities(&sources)?;
    let mut errs = Vec::new();
    for f in &l.failover {
        if f.from == f.to {
            errs.push("locality lb failover settings must specify different regions");
        }
        if f.from.contains('/') || f.to.contains('/') {
            errs.push("locality lb failover only specify region");
        }
        if f.from.contains('*') || f.to.contains('*') {
            errs.push("locality lb failover region should not contain '*' wildcard");
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// Localities (`region[/zone[/subzone]]`, a trailing `*` allowed) that do not overlap.
fn localities(list: &[&str]) -> Result<(), String> {
    type Zones = HashMap<String, HashMap<String, bool>>;
    let mut regions: HashMap<String, Zones> = HashMap::new();
    for loc in list {
        let overlap = || {
            Err(format!(
                "locality {loc} overlap with previous specified ones"
            ))
        };
        let stars = loc.matches('*').count();
        if stars > 0 && (stars > 1 || !loc.ends_with('*')) {
            return Err(format!(
                "locality {loc} wildcard '*' number can not exceed 1 and must be in the end"
            ));
        }
        if regions.contains_key("*") {
            return overlap();
        }
        let items: Vec<&str> = loc.splitn(3, '/').collect();
        if items.iter().any(|i| i.is_empty()) {
            return Err(format!(
                "locality {loc} must not contain empty region/zone/subzone info"
            ));
        }
        let region = items[0].to_string();
        let all = || HashMap::from([("*".to_string(), true)]);
        match items.as_slice() {
            [_] => {
                if regions.contains_key(&region) {
                    return overlap();
                }
                regions.insert(region, HashMap::from([("*".to_string(), all())]));
            }
            [_, zone] => match regions.get_mut(&region) {
                Some(zones) => {
                    if zones.contains_key("*") || zones.contains_key(*zone) {
                        return overlap();
                    }
                    zones.insert(zone.to_string(), all());
                }
                None => {
                    regions.insert(region, HashMap::from([(zone.to_string(), all())]));
                }
            },
            [_, zone, sub] => match regions.get_mut(&region) {
                Some(zones) => {
                    if zones.contains_key("*") {
                        return overlap();
                    }
                    match zones.get_mut(*zone) {
                        Some(subs) => {
                            if subs.get("*") == Some(&true) || subs.get(*sub) == Some(&true) {
                                return overlap();
                            }
                            subs.insert(sub.to_string(), true);
                        }
                        None => {
                            zones
                                .insert(zone.to_string(), HashMap::from([(sub.to_string(), true)]));
                        }
                    }
                }
                None => {
                    regions.insert(
                        region,
                        HashMap::from([(
                            zone.to_string(),
                            HashMap::from([(sub.to_string(), true)]),
                        )]),
                    );
                }
            },
            _ => {}
        }
    }
    Ok(())
}

/// As istiod decides it (0 counts as prime there; the table-size rule catches it first).
fn is_prime(x: u64) -> bool {
    if x != 0 && x < 4 {
        return true;
    }
    if x.is_multiple_of(2) {
        return false;
    }
    let mut f = 3;
    while f * f <= x {
        if x.is_multiple_of(f) {
            return false;
        }
        f += 2;
    }
    true
}

/// A probe header name: an HTTP token, not a pseudo-header.
/// istiod's ValidateProbeHeaderName (as Kubernetes): letters, digits and `-` only.
fn probe_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("header name cannot be empty".into());
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(format!("header name {name} is not a valid header name"));
    }
    Ok(())
}

/// Envoy's old filter names and the names that replaced them: a match on an old name still works
/// in istiod, with a warning.
const DEPRECATED_FILTER_NAMES: &[(&str, &str)] = &[
    ("envoy.buffer", "envoy.filters.http.buffer"),
    ("envoy.cors", "envoy.filters.http.cors"),
    ("envoy.csrf", "envoy.filters.http.csrf"),
    ("envoy.http_dynamo_filter", "envoy.filters.http.dynamo"),
    ("envoy.fault", "envoy.filters.http.fault"),
    (
        "envoy.grpc_http1_bridge",
        "envoy.filters.http.grpc_http1_bridge",
    ),
    (
        "envoy.grpc_json_transcoder",
        "envoy.filters.http.grpc_json_transcoder",
    ),
    ("envoy.grpc_web", "envoy.filters.http.grpc_web"),
    ("envoy.gzip", "envoy.filters.http.gzip"),
    ("envoy.health_check", "envoy.filters.http.health_check"),
    ("envoy.ip_tagging", "envoy.filters.http.ip_tagging"),
    ("envoy.lua", "envoy.filters.http.lua"),
    ("envoy.rate_limit", "envoy.filters.http.ratelimit"),
    ("envoy.router", "envoy.filters.http.router"),
    ("envoy.squash", "envoy.filters.http.squash"),
    (
        "envoy.listener.http_inspector",
        "envoy.filters.listener.http_inspector",
    ),
    (
        "envoy.listener.original_dst",
        "envoy.filters.listener.original_dst",
    ),
    (
        "envoy.listener.original_src",
        "envoy.filters.listener.original_src",
    ),
    (
        "envoy.listener.proxy_protocol",
        "envoy.filters.listener.proxy_protocol",
    ),
    (
        "envoy.listener.tls_inspector",
        "envoy.filters.listener.tls_inspector",
    ),
    (
        "envoy.client_ssl_auth",
        "envoy.filters.network.client_ssl_auth",
    ),
    ("envoy.ext_authz", "envoy.filters.network.ext_authz"),
    (
        "envoy.http_connection_manager",
        "envoy.filters.network.http_connection_manager",
    ),
    ("envoy.mongo_proxy", "envoy.filters.network.mongo_proxy"),
    ("envoy.ratelimit", "envoy.filters.network.ratelimit"),
    ("envoy.redis_proxy", "envoy.filters.network.redis_proxy"),
    ("envoy.tcp_proxy", "envoy.filters.network.tcp_proxy"),
];

/// RFC 7230 token characters.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

// ---------------------------------------------------------------------------------------------

pub fn sidecar(r: &mut Report, namespace: &str, sc: &Sidecar) {
    r.check(
        "spec.workloadSelector",
        h::label_selector(sc.workload_selector.as_ref()),
    );
    if sc
        .workload_selector
        .as_ref()
        .is_some_and(|s| s.labels.is_empty())
    {
        r.warn(
            "spec.workloadSelector",
            "sidecar: workload selector specified without labels, will be applied to all services in namespace",
        );
    }
    if sc.egress.is_empty()
        && sc.ingress.is_empty()
        && sc.outbound_traffic_policy.is_none()
        && sc.inbound_connection_pool.is_none()
    {
        r.error("spec", "sidecar: empty configuration provided");
        return;
    }
    let mut ports = HashSet::new();
    for (i, ing) in sc.ingress.iter().enumerate() {
        let ip = format!("spec.ingress[{i}]");
        let Some(port) = &ing.port else {
            r.error(
                format!("{ip}.port"),
                "sidecar: port is required for ingress listeners",
            );
            continue;
        };
        sidecar_port(r, &format!("{ip}.port"), port);
        r.check(format!("{ip}.port.number"), h::port(port.number));
        if !ing.bind.is_empty() {
            r.check(format!("{ip}.bind"), h::ip(&ing.bind));
        }
        if !ports.insert(port.number) {
            r.error(
                format!("{ip}.port"),
                "sidecar: ports on IP bound listeners must be unique",
            );
        }
        if !ing.default_endpoint.is_empty() {
            default_endpoint(r, &format!("{ip}.defaultEndpoint"), &ing.default_endpoint);
        }
        if port.target_port > 0 {
            r.error(
                format!("{ip}.port.targetPort"),
                "targetPort has no impact on Sidecars",
            );
        }
        if let Some(tls) = &ing.tls {
            let tp = format!("{ip}.tls");
            for (set, what) in [
                (
                    !tls.subject_alt_names.is_empty(),
                    "sidecar: subjectAltNames is not supported in ingress tls",
                ),
                (
                    tls.https_redirect,
                    "sidecar: httpsRedirect is not supported",
                ),
                (
                    !tls.credential_name.is_empty(),
                    "sidecar: credentialName is not currently supported",
                ),
                (
                    !tls.credential_names.is_empty(),
                    "sidecar: credentialNames is not currently supported",
                ),
                (
                    !tls.tls_certificates.is_empty(),
                    "sidecar: tls_certificates is not currently supported",
                ),
            ] {
                if set {
                    r.error(&tp, what);
                }
            }
            if matches!(
                tls.mode,
                ServerTlsMode::ISTIO_MUTUAL | ServerTlsMode::AUTO_PASSTHROUGH
            ) {
                r.error(
                    format!("{tp}.mode"),
                    format!(
                        "configuration is invalid: cannot set mode to {:?} in sidecar ingress tls",
                        tls.mode
                    ),
                );
            }
            if !h::protocol_is_tls(&port.protocol) {
                r.error(
                    &tp,
                    "server cannot have TLS settings for non HTTPS/TLS ports",
                );
            }
            server_tls(r, &tp, tls);
        }
        if let Some(pool) = &ing.connection_pool {
            connection_pool(r, &format!("{ip}.connectionPool"), pool);
            if pool.http.is_some() && !h::protocol_is_http(&port.protocol) {
                r.warn(
                    format!("{ip}.connectionPool.http"),
                    format!(
                        "sidecar: HTTP connection pool settings are configured for port {} ({:?}) but its protocol is not HTTP ({}); only TCP settings will apply",
                        port.number, port.name, port.protocol
                    ),
                );
            }
        }
    }
    let mut ports = HashSet::new();
    let mut sockets = HashSet::new();
    let mut catch_all = false;
    for (i, eg) in sc.egress.iter().enumerate() {
        let ep = format!("spec.egress[{i}]");
        match &eg.port {
            None => {
                if catch_all {
                    r.error(
                        &ep,
                        "sidecar: egress can have only one listener with empty port",
                    );
                    continue;
                }
                if i == sc.egress.len() - 1 {
                    catch_all = true;
                } else {
                    r.error(&ep, "sidecar: the egress listener with empty port should be the last listener in the list");
                }
            }
            Some(port) => {
                sidecar_port(r, &format!("{ep}.port"), port);
                if port.target_port > 0 {
                    r.error(
                        format!("{ep}.port.targetPort"),
                        "targetPort has no impact on Sidecars",
                    );
                }
                if port.number == 0 {
                    match eg.bind.strip_prefix("unix://") {
                        Some(sock) => r.check(format!("{ep}.bind"), h::unix_address(sock)),
                        None => r.error(
                            format!("{ep}.bind"),
                            "sidecar: ports with 0 value must have a unix domain socket bind address",
                        ),
                    }
                    if !matches!(eg.capture_mode, CaptureMode::DEFAULT | CaptureMode::NONE) {
                        r.error(
                            format!("{ep}.captureMode"),
                            "sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners",
                        );
                    }
                    if !sockets.insert(eg.bind.as_str()) {
                        r.error(
                            &ep,
                            "sidecar: unix domain socket values for listeners must be unique",
                        );
                    }
                } else {
                    r.check(format!("{ep}.port.number"), h::port(port.number));
                    if !eg.bind.is_empty() {
                        r.check(format!("{ep}.bind"), h::ip(&eg.bind));
                    }
                    if !ports.insert(port.number) {
                        r.error(&ep, "sidecar: ports on IP bound listeners must be unique");
                    }
                }
            }
        }
        if eg.hosts.is_empty() {
            r.error(
                format!("{ep}.hosts"),
                "sidecar: egress listener must contain at least one host",
            );
        }
        // namespace → hosts already selected, for istiod's duplicate warnings.
        let mut selected: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
        for (j, hostname) in eg.hosts.iter().enumerate() {
            let hp = format!("{ep}.hosts[{j}]");
            if let Some((ns, svc)) = hostname.split_once('/')
                && !ns.starts_with('~')
            {
                let ns = if ns == "." { namespace } else { ns };
                let seen = selected.entry(ns).or_default();
                let duplicate = if svc == "*" {
                    !seen.is_empty()
                } else {
                    seen.contains(svc) || seen.contains("*")
                };
                if duplicate {
                    r.warn(&hp, format!("duplicated egress host: {hostname}"));
                }
                seen.insert(svc);
            }
            namespace_slash_host(r, &hp, hostname, false);
        }
        if selected.get("*").is_some_and(|s| s.contains("*")) && selected.len() != 1 {
            r.warn(
                format!("{ep}.hosts"),
                "`*/*` host select all resources, no other hosts can be added",
            );
        }
    }
    if let Some(otp) = &sc.outbound_traffic_policy
        && let Some(proxy) = &otp.egress_proxy
    {
        if otp.mode != OutboundTrafficPolicyMode::ALLOW_ANY {
            r.error(
                "spec.outboundTrafficPolicy",
                "sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode",
            );
        } else {
            r.check(
                "spec.outboundTrafficPolicy.egressProxy.host",
                h::fqdn(&proxy.host),
            );
            if proxy.port.is_none() {
                r.error(
                    "spec.outboundTrafficPolicy.egressProxy.port",
                    "sidecar: egress_proxy port must be non-nil",
                );
            }
            destination(r, "spec.outboundTrafficPolicy.egressProxy", proxy);
        }
    }
    if let Some(pool) = &sc.inbound_connection_pool {
        connection_pool(r, "spec.inboundConnectionPool", pool);
    }
}

fn sidecar_port(r: &mut Report, path: &str, port: &Port) {
    if !port.name.is_empty() {
        r.check(format!("{path}.name"), h::port_name(&port.name));
    }
    r.check(format!("{path}.protocol"), h::protocol(&port.protocol));
}

fn default_endpoint(r: &mut Report, path: &str, endpoint: &str) {
    if let Some(sock) = endpoint.strip_prefix("unix://") {
        r.check(path, h::unix_address(sock));
        return;
    }
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        r.error(path, "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>, 0.0.0.0:<port>, :<port>, or unix://filepath");
        return;
    };
    if !matches!(host, "" | "127.0.0.1" | "0.0.0.0" | "[::1]" | "[::]") {
        r.error(path, "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>, 0.0.0.0:<port>, :<port>, or unix://filepath");
    }
    match port.parse::<u32>() {
        Ok(p) => r.check(path, h::port(p)),
        Err(e) => r.error(
            path,
            format!("sidecar: defaultEndpoint port ({port}) is not a number: {e}"),
        ),
    }
}

// ---------------------------------------------------------------------------------------------

pub fn envoy_filter(r: &mut Report, ef: &EnvoyFilter) {
    r.warn(
        "",
        "EnvoyFilter exposes internal implementation details that may change at any time. Prefer other APIs if possible, and exercise extreme caution, especially around upgrades.",
    );
    r.check(
        "spec.workloadSelector",
        h::label_selector(ef.workload_selector.as_ref()),
    );
    if ef
        .workload_selector
        .as_ref()
        .is_some_and(|s| s.labels.is_empty())
    {
        r.warn(
            "spec.workloadSelector",
            "Envoy filter: workload selector specified without labels, will be applied to all services in namespace",
        );
    }
    if ef.workload_selector.is_some() && !ef.target_refs.is_empty() {
        r.error(
            "spec",
            "only one of targetRefs or workloadSelector can be set",
        );
    }
    let applies_to_listener = [
        ApplyTo::LISTENER,
        ApplyTo::FILTER_CHAIN,
        ApplyTo::NETWORK_FILTER,
        ApplyTo::HTTP_FILTER,
    ];
    let applies_to_route = [
        ApplyTo::ROUTE_CONFIGURATION,
        ApplyTo::VIRTUAL_HOST,
        ApplyTo::HTTP_ROUTE,
    ];
    for (i, cp) in ef.config_patches.iter().enumerate() {
        let pp = format!("spec.configPatches[{i}]");
        // istiod does not validate waypoint patches yet.
        if cp
            .match_
            .as_ref()
            .is_some_and(|m| m.context == PatchContext::WAYPOINT)
        {
            continue;
        }
        if cp.apply_to == ApplyTo::INVALID {
            r.error(format!("{pp}.applyTo"), "Envoy filter: missing applyTo");
            continue;
        }
        let Some(patch) = &cp.patch else {
            r.error(format!("{pp}.patch"), "Envoy filter: missing patch");
            continue;
        };
        if patch.operation == PatchOperation::INVALID {
            r.error(
                format!("{pp}.patch.operation"),
                "Envoy filter: missing patch operation",
            );
            continue;
        }
        if patch.operation != PatchOperation::REMOVE && patch.value.is_none() {
            r.error(
                format!("{pp}.patch.value"),
                "Envoy filter: missing patch value for non-remove operation",
            );
            continue;
        }
        let match_ok = 'matched: {
            let Some(m) = &cp.match_ else {
                break 'matched true;
            };
            if let Some(proxy) = &m.proxy
                && proxy.proxy_version.len() > 1024
            {
                r.warn(
                    format!("{pp}.match.proxy.proxyVersion"),
                    "Envoy filter: proxyVersion match exceeds 1024 characters and will be ignored",
                );
            } else if let Some(proxy) = &m.proxy
                && !proxy.proxy_version.is_empty()
                && let Err(e) = regex::Regex::new(&proxy.proxy_version)
            {
                r.error(
                    format!("{pp}.match.proxy.proxyVersion"),
                    format!("Envoy filter: invalid regex for proxy version, [{e}]"),
                );
                break 'matched false;
            }
            let object_types = [
                m.listener.is_some(),
                m.route_configuration.is_some(),
                m.cluster.is_some(),
            ];
            if h::count_set(&object_types) > 1 {
                r.error(
                format!("{pp}.match"),
                "Envoy filter: only one of listener, routeConfiguration or cluster may be matched",
            );
                break 'matched false;
            }
            let any_object = object_types.iter().any(|b| *b);
            if applies_to_listener.contains(&cp.apply_to) {
                if any_object && m.listener.is_none() {
                    r.error(&pp, "Envoy filter: applyTo for listener class objects cannot have non listener match");
                    break 'matched false;
                }
                if let Some(filter) = m
                    .listener
                    .as_ref()
                    .and_then(|l| l.filter_chain.as_ref())
                    .and_then(|fc| fc.filter.as_ref())
                {
                    if matches!(cp.apply_to, ApplyTo::LISTENER | ApplyTo::FILTER_CHAIN) {
                        r.warn(
                            &pp,
                            format!(
                                "Envoy filter: filter match has no effect when used with {:?}",
                                cp.apply_to
                            ),
                        );
                    }
                    if filter.name.is_empty() {
                        r.error(&pp, "Envoy filter: filter match has no name to match on");
                    } else if let Some(sub) = &filter.sub_filter {
                        if cp.apply_to != ApplyTo::HTTP_FILTER {
                            r.error(&pp, "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only");
                        } else if filter.name != "envoy.filters.network.http_connection_manager"
                            && filter.name != "envoy.http_connection_manager"
                        {
                            r.error(
                            &pp,
                            "Envoy filter: subfilter match requires filter match with envoy.filters.network.http_connection_manager",
                        );
                        } else if sub.name.is_empty() {
                            r.error(&pp, "Envoy filter: subfilter match has no name to match on");
                        }
                    }
                    let names = std::iter::once(filter.name.as_str())
                        .chain(filter.sub_filter.as_ref().map(|s| s.name.as_str()));
                    for name in names {
                        if let Some((_, canonical)) =
                            DEPRECATED_FILTER_NAMES.iter().find(|(old, _)| *old == name)
                        {
                            r.warn(
                            &pp,
                            format!(
                                "using deprecated filter name {name:?}; use {canonical:?} instead"
                            ),
                        );
                        }
                    }
                }
            } else if applies_to_route.contains(&cp.apply_to) {
                if any_object && m.route_configuration.is_none() {
                    r.error(&pp, "Envoy filter: applyTo for http route class objects cannot have non route configuration match");
                }
            } else if cp.apply_to == ApplyTo::CLUSTER && any_object && m.cluster.is_none() {
                r.error(
                    &pp,
                    "Envoy filter: applyTo for cluster class objects cannot have non cluster match",
                );
            }
            true
        };
        if !match_ok {
            continue;
        }
        if let Some(value) = &patch.value {
            patch_value(r, &pp, cp.apply_to, value);
        }
    }
}

/// The Envoy message a patch value of `applyTo` is read as.
fn patch_type(apply_to: ApplyTo) -> Option<&'static str> {
    Some(match apply_to {
        ApplyTo::CLUSTER => "envoy.config.cluster.v3.Cluster",
        ApplyTo::LISTENER => "envoy.config.listener.v3.Listener",
        ApplyTo::ROUTE_CONFIGURATION => "envoy.config.route.v3.RouteConfiguration",
        ApplyTo::FILTER_CHAIN => "envoy.config.listener.v3.FilterChain",
        ApplyTo::HTTP_FILTER => {
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter"
        }
        ApplyTo::NETWORK_FILTER => "envoy.config.listener.v3.Filter",
        ApplyTo::VIRTUAL_HOST => "envoy.config.route.v3.VirtualHost",
        ApplyTo::HTTP_ROUTE => "envoy.config.route.v3.Route",
        ApplyTo::EXTENSION_CONFIG => "envoy.config.core.v3.TypedExtensionConfig",
        ApplyTo::BOOTSTRAP => "envoy.config.bootstrap.v3.Bootstrap",
        ApplyTo::LISTENER_FILTER => "envoy.config.listener.v3.ListenerFilter",
        ApplyTo::INVALID => return None,
    })
}

/// istiod's check of a patch value: it must read as the Envoy type its `applyTo` names (an
/// `@type` naming no known message included); unknown fields are warned about. A type the
/// descriptors do not carry is not judged (never a false denial).
fn patch_value(r: &mut Report, pp: &str, apply_to: ApplyTo, value: &serde_json::Value) {
    use crate::xds::proto_merge::{check_json, knows, missing_typed_config};
    let Some(type_name) = patch_type(apply_to).filter(|t| knows(t)) else {
        return;
    };
    if let Err(e) = check_json(type_name, value, false) {
        // Envoy's v2 API is gone: say so, as istiod does.
        let text = e.to_string();
        let hint = if text.contains(".v2.") || text.contains(".v2alpha") {
            " (hint: try using the v3 XDS API)"
        } else {
            ""
        };
        r.error(
            format!("{pp}.patch.value"),
            format!("Envoy filter: {text}{hint}"),
        );
        return;
    }
    if let Err(e) = check_json(type_name, value, true) {
        r.warn(format!("{pp}.patch.value"), format!("Envoy filter: {e}"));
    }
    if let Ok(untyped) = missing_typed_config(type_name, value)
        && !untyped.is_empty()
    {
        r.warn(
            format!("{pp}.patch.value"),
            format!(
                "using deprecated types by name without typed_config; {}",
                untyped.join(", ")
            ),
        );
    }
}

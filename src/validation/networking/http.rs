//! A VirtualService's HTTP routes: matches, destinations, redirects, rewrites, headers, CORS,
//! faults, retries.

use crate::config::common::StringMatch;
use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;

pub(super) const SUPPORTED_RETRY_ON: &[&str] = &[
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

pub(super) const HTTP_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE",
];

pub(super) const MESH_GATEWAY: &str = "mesh";

pub(super) fn http_route(r: &mut Report, path: &str, route: &HttpRoute, in_delegate: bool) {
    if route.delegate.is_some() && in_delegate {
        r.error(
            format!("{path}.delegate"),
            "delegate HTTP route cannot contain delegate",
        );
    }
    route_action(r, path, route, in_delegate);

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
    if route.websocket_upgrade.is_some() {
        r.warn(
            format!("{path}.websocketUpgrade"),
            "websocketUpgrade was removed from Istio's API and is ignored, as istiod ignores it: WebSocket upgrades are always allowed",
        );
    }
    mirrors(r, path, route);
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

/// What the route does, and what may not come with it: a delegate at the root, a redirect, a
/// direct response, or destinations.
fn route_action(r: &mut Report, path: &str, route: &HttpRoute, in_delegate: bool) {
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
}

/// `mirror` or `mirrors` (not both), and the share of traffic mirrored.
fn mirrors(r: &mut Report, path: &str, route: &HttpRoute) {
    if route.mirror.is_some() && !route.mirrors.is_empty() {
        r.error(path, "HTTP route cannot contain both mirror and mirrors");
    }
    if let Some(m) = &route.mirror {
        destination(r, &format!("{path}.mirror"), m);
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
}

pub(super) fn http_redirect(r: &mut Report, path: &str, redirect: &HttpRedirect) {
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
pub(super) fn headers(r: &mut Report, path: &str, headers: Option<&Headers>) {
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

pub(super) fn header_name_with_authority(name: &str) -> Result<(), String> {
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

pub(super) fn header_operation_name(name: &str) -> Result<(), String> {
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

pub(super) fn cors_policy(r: &mut Report, path: &str, cors: &CorsPolicy) {
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

pub(super) fn fault_injection(r: &mut Report, path: &str, fault: &HttpFaultInjection) {
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

pub(super) fn http_match(r: &mut Report, path: &str, m: &HttpMatchRequest) {
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
pub(super) fn authority_rewrite(r: &mut Report, path: &str, route: &HttpRoute) {
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
pub(super) fn string_match(
    sm: &StringMatch,
    field: &str,
    empty_prefix_ok: bool,
) -> Result<(), String> {
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
pub(super) fn match_header_name(name: &str) -> Result<(), String> {
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

pub(super) fn http_retry(r: &mut Report, path: &str, retry: &HttpRetry) {
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

pub(super) fn destination(r: &mut Report, path: &str, d: &Destination) {
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
pub(super) fn weights_total(r: &mut Report, path: &str, weights: &[i32]) {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    if weights.len() > 1 && total == 0 {
        r.error(path, "total destination weight = 0");
    }
}

pub(super) fn weight(w: i32) -> Result<(), String> {
    if w < 0 {
        Err(format!("weight {w} < 0"))
    } else {
        Ok(())
    }
}

pub(super) fn http_route_destinations(r: &mut Report, path: &str, dests: &[HttpRouteDestination]) {
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

pub(super) fn route_destinations(r: &mut Report, path: &str, dests: &[RouteDestination]) {
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

/// RFC 7230 token characters.
pub(super) fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Gateway references: `mesh`, `name`, `namespace/name` or a legacy FQDN (warned about). As in
/// istiod, checking stops at the first reference without a namespace.
pub(super) fn gateway_names(r: &mut Report, path: &str, names: &[String]) {
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

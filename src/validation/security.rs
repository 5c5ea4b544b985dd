//! Rules for security.istio.io kinds (PeerAuthentication, AuthorizationPolicy,
//! RequestAuthentication).

use super::helpers as h;
use super::report::Report;
use crate::config::security::*;

pub fn peer_authentication(r: &mut Report, pa: &PeerAuthentication) {
    let empty_selector = pa
        .selector
        .as_ref()
        .is_none_or(|s| s.match_labels.is_empty());
    if let Some(ports) = &pa.port_level_mtls {
        if empty_selector && !ports.is_empty() {
            r.error(
                "spec.portLevelMtls",
                "mesh/namespace peer authentication cannot have port level mTLS",
            );
        }
        if ports.is_empty() {
            r.error(
                "spec.portLevelMtls",
                "port level mTLS, if defined, must have at least one element",
            );
        }
        for key in ports.keys() {
            if !key.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p)) {
                r.error(
                    format!("spec.portLevelMtls.{key}"),
                    "port must be in range 1..65535",
                );
            }
        }
    }
    r.check("spec.selector", h::workload_selector(pa.selector.as_ref()));
    selector_without_labels(r, pa.selector.as_ref());
}

/// Attributes an AuthorizationPolicy `when` condition may test (prefix match where it ends in `[`).
/// istiod's `a[b]` form for map-like keys.
fn map_key(key: &str) -> Result<(), String> {
    match key.find('[') {
        Some(open) if key.ends_with(']') && open > 0 && open < key.len() - 2 => Ok(()),
        _ => Err(format!("bad key ({key}): should have format a[b]")),
    }
}

/// istiod's ValidateAttribute for a condition key (values are checked separately).
fn condition_key(key: &str) -> Result<(), String> {
    match key {
        "source.ip"
        | "remote.ip"
        | "source.namespace"
        | "source.serviceAccount"
        | "source.principal"
        | "source.trustDomain"
        | "request.auth.principal"
        | "request.auth.audiences"
        | "request.auth.presenter"
        | "destination.ip"
        | "destination.port"
        | "connection.sni" => Ok(()),
        k if k.starts_with("request.headers")
            || k.starts_with("request.auth.claims")
            || k.starts_with("experimental.envoy.filters.") =>
        {
            map_key(k)
        }
        "destination.namespace" => Err(format!(
            "attribute {key} is replaced by the metadata.namespace"
        )),
        k if k.starts_with("destination.labels") => Err(format!(
            "attribute {key} is replaced by the workload selector"
        )),
        "destination.name" | "destination.user" => Err(format!(
            "deprecated attribute {key}: only supported in v1alpha1"
        )),
        _ => Err(format!("unknown attribute: {key}")),
    }
}

fn condition_values(key: &str, values: &[String]) -> Result<(), String> {
    // As istiod's CheckEmptyValues: an empty value would match nothing, or everything.
    if values.iter().any(String::is_empty) {
        return Err(format!("empty value not allowed, found in {key}"));
    }
    for v in values {
        match key {
            "source.ip" | "remote.ip" | "destination.ip" => h::ip_subnet(v)?,
            "destination.port" => {
                let p: u32 = v.parse().map_err(|_| format!("invalid port: {v}"))?;
                h::port(p)?;
            }
            _ => {}
        }
    }
    match key {
        "source.serviceAccount" => service_accounts(key, values),
        "source.trustDomain" => wildcard_values(key, values),
        _ => Ok(()),
    }
}

pub fn authorization_policy(r: &mut Report, ap: &AuthorizationPolicy) {
    r.check("spec.selector", h::workload_selector(ap.selector.as_ref()));
    for e in h::policy_targets(
        ap.selector.is_some(),
        ap.target_ref.as_ref(),
        &ap.target_refs,
    ) {
        r.error("spec", e);
    }
    selector_without_labels(r, ap.selector.as_ref());
    if ap.action == AuthorizationAction::CUSTOM {
        if ap.rules.is_none() {
            r.error(
                "spec.rules",
                "CUSTOM action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request",
            );
        } else if ap.provider.as_ref().is_none_or(|p| p.name.is_empty()) {
            r.error("spec.provider.name", "`provider.name` must not be empty");
        }
        custom_rules(r, ap);
    } else if ap.provider.is_some() {
        r.error(
            "spec.provider",
            format!(
                "`provider` must not be with non CUSTOM action, found {:?}",
                ap.action
            ),
        );
    }
    let rules = ap.rules.as_deref().unwrap_or_default();
    if ap.action == AuthorizationAction::DENY && rules.is_empty() {
        r.error(
            "spec.rules",
            "DENY action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request",
        );
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("spec.rules[{i}]");
        deny_on_http_only(r, &rp, ap.action, rule);
        if let Some(from) = &rule.from {
            rule_sources(r, &rp, i, from);
        }
        if let Some(to) = &rule.to {
            rule_operations(r, &rp, to);
        }
        rule_conditions(r, &rp, &rule.when);
    }
}

/// A rule's `from`: each source present and not empty, service accounts not with namespaces
/// or principals, no empty value, IP blocks that parse.
fn rule_sources(r: &mut Report, rp: &str, i: usize, from: &[RuleFrom]) {
    if from.is_empty() {
        r.error(format!("{rp}.from"), "`from` must not be empty");
    }
    for (j, f) in from.iter().enumerate() {
        let fp = format!("{rp}.from[{j}].source");
        let Some(src) = &f.source else {
            r.error(fp, "`from.source` must not be nil");
            continue;
        };
        if src.is_empty() {
            r.error(&fp, "`from.source` must not be empty");
        }
        let identities = [
            &src.principals,
            &src.not_principals,
            &src.namespaces,
            &src.not_namespaces,
        ];
        if identities.iter().any(|l| !l.is_empty())
            && (!src.service_accounts.is_empty() || !src.not_service_accounts.is_empty())
        {
            r.error(
                &fp,
                format!(
                    "cannot set serviceAccounts with namespaces or principals, found at rule {i}"
                ),
            );
        }
        for (name, list) in [
            ("ServiceAccounts", &src.service_accounts),
            ("NotServiceAccounts", &src.not_service_accounts),
        ] {
            r.check(&fp, service_accounts(name, list));
        }
        for (name, list) in [
            ("TrustDomains", &src.trust_domains),
            ("NotTrustDomains", &src.not_trust_domains),
        ] {
            r.check(&fp, trust_domains(name, list));
        }
        for (name, list) in src.fields() {
            if list.iter().any(String::is_empty) {
                r.error(
                    format!("{fp}.{name}"),
                    format!("empty value is found for {name}"),
                );
            }
            if name.ends_with("pBlocks") || name.ends_with("IpBlocks") {
                for (k, b) in list.iter().enumerate() {
                    if !b.is_empty() {
                        r.check(format!("{fp}.{name}[{k}]"), h::ip_subnet(b));
                    }
                }
            }
        }
    }
}

/// A rule's `to`: each operation present and not empty, no empty value, ports and path
/// templates that parse.
fn rule_operations(r: &mut Report, rp: &str, to: &[RuleTo]) {
    if to.is_empty() {
        r.error(format!("{rp}.to"), "`to` must not be empty");
    }
    for (j, t) in to.iter().enumerate() {
        let tp = format!("{rp}.to[{j}].operation");
        let Some(op) = &t.operation else {
            r.error(tp, "`to.operation` must not be nil");
            continue;
        };
        if op.is_empty() {
            r.error(&tp, "`to.operation` must not be empty");
        }
        for (name, list) in op.fields() {
            if list.iter().any(String::is_empty) {
                r.error(
                    format!("{tp}.{name}"),
                    format!("empty value is found for {name}"),
                );
            }
        }
        // istiod's ValidatePorts: 0 is a valid number there.
        for (name, list) in [("ports", &op.ports), ("notPorts", &op.not_ports)] {
            for (k, p) in list.iter().enumerate() {
                if !p.parse::<u32>().is_ok_and(|n| n <= 65535) {
                    r.error(format!("{tp}.{name}[{k}]"), format!("bad port ({p})"));
                }
            }
        }
        for (name, list) in [("Paths", &op.paths), ("NotPaths", &op.not_paths)] {
            r.check(
                format!("{tp}.{}", name.to_lowercase()),
                path_templates(name, list),
            );
        }
    }
}

/// A rule's `when`: each condition a known key with values, and a warning for a key Rudder does
/// not enforce.
fn rule_conditions(r: &mut Report, rp: &str, when: &[Condition]) {
    for (j, c) in when.iter().enumerate() {
        let cp = format!("{rp}.when[{j}]");
        if c.key.is_empty() {
            r.error(format!("{cp}.key"), "`key` must not be empty");
            continue;
        }
        if let Err(e) = condition_key(&c.key) {
            r.error(format!("{cp}.key"), e);
            continue;
        }
        if !crate::config::security::when_key_expressible(&c.key) {
            r.warn(
                format!("{cp}.key"),
                format!(
                    "accepted but not honoured by Rudder yet: condition {} is not enforced (an ALLOW rule with it allows nothing; a DENY rule ignores it and denies more)",
                    c.key
                ),
            );
        }
        if c.values.is_empty() && c.not_values.is_empty() {
            r.error(
                &cp,
                format!(
                    "at least one of `values` or `notValues` must be set for key {}",
                    c.key
                ),
            );
        }
        r.check(format!("{cp}.values"), condition_values(&c.key, &c.values));
        r.check(
            format!("{cp}.notValues"),
            condition_values(&c.key, &c.not_values),
        );
    }
}

pub fn request_authentication(r: &mut Report, ra: &RequestAuthentication) {
    r.check("spec.selector", h::workload_selector(ra.selector.as_ref()));
    for e in h::policy_targets(
        ra.selector.is_some(),
        ra.target_ref.as_ref(),
        &ra.target_refs,
    ) {
        r.error("spec", e);
    }
    selector_without_labels(r, ra.selector.as_ref());
    for (i, rule) in ra.jwt_rules.iter().enumerate() {
        let jp = format!("spec.jwtRules[{i}]");
        if rule.issuer.is_empty() && rule.jwks_uri.is_empty() {
            r.error(
                format!("{jp}.issuer"),
                "issuer or jwksUri must be non-empty string",
            );
        }
        if rule.audiences.iter().any(String::is_empty) {
            r.error(
                format!("{jp}.audiences"),
                "audience must be non-empty string",
            );
        }
        if !rule.jwks_uri.is_empty() {
            match url::Url::parse(&rule.jwks_uri) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => r.error(
                    format!("{jp}.jwksUri"),
                    format!("jwks URI {:?} is not a valid http(s) URL", rule.jwks_uri),
                ),
            }
        }
        if !rule.jwks.is_empty() {
            jwks(r, &format!("{jp}.jwks"), &rule.jwks);
        }
        if rule.from_headers.iter().any(|hd| hd.name.is_empty()) {
            r.error(
                format!("{jp}.fromHeaders"),
                "location header name must be non-empty string",
            );
        }
        if rule.from_params.iter().any(String::is_empty) {
            r.error(
                format!("{jp}.fromParams"),
                "location query must be non-empty string",
            );
        }
        if rule.from_cookies.iter().any(String::is_empty) {
            r.error(
                format!("{jp}.fromCookies"),
                "cookie name must be non-empty string",
            );
        }
        for (j, c) in rule.output_claim_to_headers.iter().enumerate() {
            let cp = format!("{jp}.outputClaimToHeaders[{j}]");
            if c.header.is_empty() || c.claim.is_empty() {
                r.error(
                    cp,
                    "outputClaimToHeaders header and claim value must be non-empty string",
                );
            } else if !c
                .header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                r.error(
                    format!("{cp}.header"),
                    format!("header name {} is not a valid header name", c.header),
                );
            }
        }
        if let Some(t) = &rule.timeout {
            r.check(format!("{jp}.timeout"), h::duration(t));
        }
    }
}

/// istiod warns about a selector that selects everything.
pub(super) fn selector_without_labels(
    r: &mut Report,
    selector: Option<&crate::config::common::WorkloadSelector>,
) {
    if selector.is_some_and(|s| s.match_labels.is_empty()) {
        r.warn(
            "spec.selector",
            "workload selector specified without labels",
        );
    }
}

/// istiod warns when a DENY rule names only HTTP attributes: on TCP ports such a rule cannot be
/// checked, so it denies all their traffic.
fn deny_on_http_only(
    r: &mut Report,
    path: &str,
    action: AuthorizationAction,
    rule: &crate::config::security::Rule,
) {
    if action != AuthorizationAction::DENY {
        return;
    }
    let sources: Vec<_> = rule
        .from
        .iter()
        .flatten()
        .filter_map(|f| f.source.as_ref())
        .collect();
    let operations: Vec<_> = rule
        .to
        .iter()
        .flatten()
        .filter_map(|t| t.operation.as_ref())
        .collect();
    let tcp_in_from = sources.iter().any(|s| {
        [
            &s.principals,
            &s.not_principals,
            &s.ip_blocks,
            &s.not_ip_blocks,
            &s.namespaces,
            &s.not_namespaces,
            &s.remote_ip_blocks,
            &s.not_remote_ip_blocks,
            &s.service_accounts,
            &s.not_service_accounts,
        ]
        .iter()
        .any(|l| !l.is_empty())
    });
    let tcp_in_to = operations
        .iter()
        .any(|o| !o.ports.is_empty() || !o.not_ports.is_empty());
    let (from, to) = (!sources.is_empty(), !operations.is_empty());
    if (from && !to && !tcp_in_from) || (to && !tcp_in_to) {
        r.warn(
            path,
            "configured AuthorizationPolicy will deny all traffic to TCP ports under its scope due to the use of only HTTP attributes in a DENY rule; it is recommended to explicitly specify the port",
        );
    }
}

/// istiod's CheckServiceAccount: `name` or `namespace/name`, no wildcards, at most 16.
fn service_accounts(key: &str, values: &[String]) -> Result<(), String> {
    if values.len() > 16 {
        return Err("may not have more than 16 values".into());
    }
    let format = "expected format 'serviceAccount' or 'namespace/serviceAccount'";
    for v in values {
        if v.is_empty() {
            return Err(format!("empty value not allowed, found in {key}"));
        }
        if v.contains('*') {
            return Err(format!("wildcard not allowed, found in {key}"));
        }
        if v.matches('/').count() > 1 {
            return Err(format!("{format}, found {v:?} in {key}"));
        }
        if v.len() > 320 {
            return Err(format!(
                "value cannot exceed 320 characters, found {v:?} in {key}"
            ));
        }
        match v.split_once('/') {
            Some(("", _)) => {
                return Err(format!("{format}, found empty namespace {v:?} in {key}"));
            }
            Some((_, "")) => {
                return Err(format!(
                    "{format}, found empty serviceAccount {v:?} in {key}"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// istiod's CheckTrustDomainValues: one wildcard at most, at an end; no `/`.
fn trust_domains(key: &str, values: &[String]) -> Result<(), String> {
    wildcard_values(key, values)?;
    match values.iter().find(|v| v.contains('/')) {
        Some(v) => Err(format!(
            "trust domain must not contain '/', found in {key}: {v:?}"
        )),
        None => Ok(()),
    }
}

/// istiod's CheckWildcardValues: no empty value; one wildcard at most, at an end.
fn wildcard_values(key: &str, values: &[String]) -> Result<(), String> {
    for v in values {
        if v.is_empty() {
            return Err(format!("empty value is found for {key}"));
        }
        let stars = v.matches('*').count();
        if stars > 1 {
            return Err(format!(
                "at most one wildcard is allowed, found in {key}: {v:?}"
            ));
        }
        if stars == 1 && v != "*" && !v.starts_with('*') && !v.ends_with('*') {
            return Err(format!(
                "wildcard is only allowed at the start or end, found in {key}: {v:?}"
            ));
        }
    }
    Ok(())
}

/// An inline JWKS: a JSON Web Key Set (or one key), as istiod parses it; keys carrying private
/// material are accepted with istiod's warning (only the public part is used).
fn jwks(r: &mut Report, path: &str, text: &str) {
    let parsed: Result<serde_json::Value, _> = serde_json::from_str(text);
    let keys = match &parsed {
        Ok(serde_json::Value::Object(o)) => match o.get("keys") {
            Some(serde_json::Value::Array(keys)) => keys.iter().collect::<Vec<_>>(),
            Some(_) => {
                r.error(path, "jwks parse error: \"keys\" must be an array");
                return;
            }
            None if o.contains_key("kty") => {
                vec![parsed.as_ref().map_or(&serde_json::Value::Null, |v| v)]
            }
            None => {
                r.error(
                    path,
                    "jwks parse error: neither a key set (\"keys\") nor a key (\"kty\")",
                );
                return;
            }
        },
        Ok(_) => {
            r.error(path, "jwks parse error: not a JSON object");
            return;
        }
        Err(e) => {
            r.error(path, format!("jwks parse error: {e}"));
            return;
        }
    };
    for (i, key) in keys.iter().enumerate() {
        let private =
            key.get("d").is_some() || key.get("kty").and_then(|k| k.as_str()) == Some("oct");
        if private {
            r.warn(
                path,
                format!("jwks key at index {i} contains private key material; only public keys are used for verification"),
            );
        }
    }
}

/// What a CUSTOM rule may not use yet (istiod's list): identities are the external authorizer's job.
fn custom_rules(r: &mut Report, ap: &AuthorizationPolicy) {
    for (i, rule) in ap.rules.iter().flatten().enumerate() {
        let rp = format!("spec.rules[{i}]");
        for src in rule.from.iter().flatten().filter_map(|f| f.source.as_ref()) {
            for (name, list) in [
                ("From.Namespaces", &src.namespaces),
                ("From.NotNamespaces", &src.not_namespaces),
                ("From.ServiceAccounts", &src.service_accounts),
                ("From.NotServiceAccounts", &src.not_service_accounts),
                ("From.TrustDomains", &src.trust_domains),
                ("From.NotTrustDomains", &src.not_trust_domains),
                ("From.Principals", &src.principals),
                ("From.NotPrincipals", &src.not_principals),
                ("From.RequestPrincipals", &src.request_principals),
                ("From.NotRequestPrincipals", &src.not_request_principals),
            ] {
                if !list.is_empty() {
                    r.error(
                        format!("{rp}.from"),
                        format!("{name} is currently not supported with CUSTOM action"),
                    );
                }
            }
        }
        for c in &rule.when {
            let k = c.key.as_str();
            if matches!(
                k,
                "source.namespace"
                    | "source.serviceAccount"
                    | "source.trustDomain"
                    | "source.principal"
            ) || k.starts_with("request.auth.")
            {
                r.error(
                    format!("{rp}.when"),
                    format!("{k} is currently not supported with CUSTOM action"),
                );
            }
        }
    }
}

/// istiod's CheckValidPathTemplate: `{*}` a segment, `{**}` the rest (last), nothing else in braces;
/// in a templated path every other segment a plain RFC 3986 path literal.
fn path_templates(key: &str, paths: &[String]) -> Result<(), String> {
    for path in paths {
        let templated = path.contains("{*}") || path.contains("{**}");
        let trimmed = path.trim_matches('/');
        let mut any_seen = false;
        for glob in trimmed.split('/') {
            match glob {
                "{*}" if !any_seen => continue,
                "{**}" if !any_seen => {
                    any_seen = true;
                    continue;
                }
                "{*}" | "{**}" => {
                    return Err(format!(
                        "invalid or unsupported path {trimmed}, found in {key}. {{**}} is not the last operator"
                    ));
                }
                _ => {}
            }
            if glob.contains(['{', '}']) {
                return Err(format!(
                    "invalid or unsupported path {trimmed}, found in {key}. Contains '{{' or '}}' beyond a supported path template"
                ));
            }
            let literal = glob
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@%".contains(&b));
            if templated && !literal {
                return Err(format!(
                    "invalid or unsupported path {trimmed}, found in {key}. Contains segment {glob} with invalid string literal"
                ));
            }
        }
    }
    Ok(())
}

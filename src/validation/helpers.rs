//! Field-level checks shared by all kinds. Each returns Istio's message on failure.

use crate::config::common::{
    Duration, LabelSelector, PolicyTargetReference, StringMatch, WorkloadSelector,
};
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$").expect("static regex")
});
static WILDCARD_LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\*|(?:\*|\*-)?[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)$")
        .expect("static regex")
});
static LABEL_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9](?:[-a-zA-Z0-9_.]*[a-zA-Z0-9])?$").expect("static regex")
});

/// How many of a oneof's alternatives are set.
pub fn count_set(alternatives: &[bool]) -> usize {
    alternatives.iter().filter(|b| **b).count()
}

pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && DNS1123_LABEL.is_match(s)
}

pub fn dns1123_label(s: &str) -> Result<(), String> {
    if is_dns1123_label(s) {
        Ok(())
    } else {
        Err(format!("{s:?} is not a valid DNS-1123 label"))
    }
}

/// Kubernetes object names: lower-case DNS subdomain.
pub fn dns1123_subdomain(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && DNS1123_LABEL.is_match(l)
                && l == l.to_ascii_lowercase()
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a valid name: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character"
        ))
    }
}

fn dns_preconditions(name: &str) -> Result<(), String> {
    if name.len() > 255 {
        return Err(format!("domain name {name:?} too long (max 255)"));
    }
    if name.is_empty() {
        return Err("empty domain name not allowed".into());
    }
    Ok(())
}

/// Checks the labels of `labels_part`, naming the whole `domain` in any error.
fn dns1123_labels(domain: &str, labels_part: &str) -> Result<(), String> {
    let parts: Vec<&str> = labels_part.split('.').collect();
    let tld = parts.last().copied().unwrap_or_default();
    if !tld.is_empty() && tld.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "domain name {domain:?} invalid (top level domain {tld:?} cannot be all-numeric)"
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == parts.len() - 1 && label.is_empty() {
            return Ok(());
        }
        if !is_dns1123_label(label) {
            return Err(format!(
                "domain name {domain:?} invalid (label {label:?} invalid)"
            ));
        }
    }
    Ok(())
}

pub fn fqdn(name: &str) -> Result<(), String> {
    dns_preconditions(name)?;
    dns1123_labels(name, name)
}

/// A domain name that may start with a wildcard label (`*`, `*.foo.com`, `*foo.com`).
pub fn wildcard_domain(domain: &str) -> Result<(), String> {
    dns_preconditions(domain)?;
    let (first, rest) = match domain.split_once('.') {
        Some((f, r)) => (f, Some(r)),
        None => (domain, None),
    };
    if !(first.len() <= 63 && WILDCARD_LABEL.is_match(first)) {
        return Err(format!(
            "domain name {domain:?} invalid (label {first:?} invalid)"
        ));
    }
    match rest {
        Some(rest) => dns1123_labels(domain, rest),
        None => Ok(()),
    }
}

/// A wildcard only as a whole first label (`*.foo.com`) or the whole host (`*`).
pub fn partial_wildcard(host: &str) -> Result<(), String> {
    if host.contains('*') && host.len() != 1 && !host.starts_with("*.") {
        Err(format!("partial wildcard {host:?} not allowed"))
    } else {
        Ok(())
    }
}

pub fn port(p: u32) -> Result<(), String> {
    if (1..=65535).contains(&p) {
        Ok(())
    } else {
        Err(format!("port number {p} must be in the range 1..65535"))
    }
}

/// istiod: a port name is a DNS-1123 label.
pub fn port_name(name: &str) -> Result<(), String> {
    if is_dns1123_label(name) {
        Ok(())
    } else {
        Err(format!("invalid port name: {name}"))
    }
}

/// Protocols Istio accepts in port definitions (case-insensitive).
pub const PROTOCOLS: &[&str] = &[
    "HTTP",
    "HTTPS",
    "HTTP2",
    "HTTP_PROXY",
    "GRPC",
    "GRPC-WEB",
    "TCP",
    "TLS",
    "MONGO",
    "REDIS",
    "MYSQL",
    "UDP",
];

/// A port protocol; empty means "detect it" (protocol sniffing), as in istiod.
pub fn protocol(p: &str) -> Result<(), String> {
    if p.is_empty() || PROTOCOLS.iter().any(|k| k.eq_ignore_ascii_case(p)) {
        Ok(())
    } else {
        Err(format!("unsupported protocol: {p}"))
    }
}

pub fn protocol_is_tls(p: &str) -> bool {
    ["HTTPS", "TLS"].iter().any(|k| k.eq_ignore_ascii_case(p))
}

pub fn protocol_is_http(p: &str) -> bool {
    ["HTTP", "HTTP2", "HTTP_PROXY", "GRPC", "GRPC-WEB"]
        .iter()
        .any(|k| k.eq_ignore_ascii_case(p))
}

pub fn percent(v: i32) -> Result<(), String> {
    if (0..=100).contains(&v) {
        Ok(())
    } else {
        Err(format!("percentage {v} is not in range 0..100"))
    }
}

pub fn percentage(v: f64) -> Result<(), String> {
    if !(0.0..=100.0).contains(&v) || (v > 0.0 && v < 0.0001) || v.is_nan() {
        Err(format!(
            "percentage {v} is neither 0.0, nor in range [0.0001, 100.0]"
        ))
    } else {
        Ok(())
    }
}

/// Durations must be at least 1ms and of millisecond precision, as Envoy's timers are.
pub fn duration(d: &Duration) -> Result<(), String> {
    let d = d.as_std();
    if d < std::time::Duration::from_millis(1) {
        return Err("duration must be greater than 1ms".into());
    }
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err("only durations to ms precision are supported".into());
    }
    Ok(())
}

pub fn ip(addr: &str) -> Result<(), String> {
    addr.parse::<IpAddr>()
        .map(|_| ())
        .map_err(|_| format!("{addr} is not a valid IP"))
}

/// `a.b.c.d`, `a.b.c.d/nn` or the IPv6 forms.
pub fn ip_subnet(subnet: &str) -> Result<(), String> {
    if subnet.contains('/') {
        subnet
            .parse::<ipnet::IpNet>()
            .map(|_| ())
            .map_err(|_| format!("{subnet} is not a valid CIDR block"))
    } else {
        ip(subnet)
    }
}

pub fn unix_address(addr: &str) -> Result<(), String> {
    if addr.is_empty() {
        return Err("unix address must not be empty".into());
    }
    if addr.starts_with('@') {
        return Ok(());
    }
    if !addr.starts_with('/') || addr.ends_with('/') {
        return Err(format!("{addr} is not an absolute path to a file"));
    }
    Ok(())
}

pub fn regex(re: &str) -> Result<(), String> {
    if re.is_empty() {
        return Err("regex string match should not be empty".into());
    }
    regex::Regex::new(re).map(|_| ()).map_err(|e| {
        format!(
            "{re:?} is not a valid regex: {}",
            first_line(&e.to_string())
        )
    })
}

fn first_line(s: &str) -> String {
    s.lines().last().unwrap_or(s).trim().to_string()
}

pub fn string_match(m: &StringMatch) -> Result<(), String> {
    match m {
        StringMatch::Regex(re) => regex(re),
        StringMatch::Exact(_) | StringMatch::Prefix(_) | StringMatch::Any => Ok(()),
    }
}

/// Kubernetes label key: optional DNS-subdomain prefix, then a name of at most 63 characters.
pub fn label_key(key: &str) -> Result<(), String> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if fqdn(prefix).is_err() {
                return Err(format!("invalid tag key: {key:?}"));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !LABEL_NAME.is_match(name) {
        return Err(format!("invalid tag key: {key:?}"));
    }
    Ok(())
}

pub fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || (value.len() <= 63 && LABEL_NAME.is_match(value)) {
        Ok(())
    } else {
        Err(format!("invalid tag value: {value:?}"))
    }
}

pub fn labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in labels {
        label_key(k)?;
        label_value(v)?;
    }
    Ok(())
}

/// istiod checks only that selector keys are not empty and that nothing is a wildcard.
fn selector_labels(selector: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in selector {
        if k.is_empty() {
            return Err(format!(
                "empty key is not supported in selector: \"{k}={v}\""
            ));
        }
        if k.contains('*') || v.contains('*') {
            return Err(format!(
                "wildcard is not supported in selector: \"{k}={v}\""
            ));
        }
    }
    Ok(())
}

pub fn workload_selector(s: Option<&WorkloadSelector>) -> Result<(), String> {
    s.map_or(Ok(()), |s| selector_labels(&s.match_labels))
}

pub fn label_selector(s: Option<&LabelSelector>) -> Result<(), String> {
    s.map_or(Ok(()), |s| selector_labels(&s.labels))
}

/// What a policy's `targetRef(s)` may name (istiod does not check the version).
const TARGET_KINDS: &[(&str, &str)] = &[
    ("", "Service"),
    ("networking.istio.io", "ServiceEntry"),
    ("gateway.networking.k8s.io", "Gateway"),
    ("gateway.networking.k8s.io", "GatewayClass"),
];

/// `selector`, `targetRef` and `targetRefs` are alternatives in the policy APIs; each reference
/// names an allowed kind in the policy's own namespace. Every problem, in istiod's words.
pub fn policy_targets(
    selector: bool,
    target_ref: Option<&PolicyTargetReference>,
    target_refs: &[PolicyTargetReference],
) -> Vec<String> {
    let mut errs = Vec::new();
    if count_set(&[selector, target_ref.is_some(), !target_refs.is_empty()]) > 1 {
        errs.push("only one of targetRefs or workloadSelector can be set".to_string());
    }
    for t in target_ref.into_iter().chain(target_refs) {
        if t.name.is_empty() {
            errs.push("targetRef name must be set".into());
        }
        if !t.namespace.is_empty() {
            errs.push(
                "targetRef namespace must not be set; cross namespace referencing is not supported"
                    .into(),
            );
        }
        let group = if t.group == "core" {
            ""
        } else {
            t.group.as_str()
        };
        if !TARGET_KINDS.contains(&(group, t.kind.as_str())) {
            errs.push(format!(
                "targetRef must be to one of [core/v1/Service networking.istio.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway gateway.networking.k8s.io/v1/GatewayClass] but was {}/{}",
                t.group, t.kind
            ));
        }
    }
    errs
}

/// `exportTo`: `*`, `.`, `~` (ServiceEntry only) or namespace names, without duplicates.
pub fn export_to(
    namespace: &str,
    export_to: &[String],
    is_service_entry: bool,
) -> Result<(), String> {
    let mut seen = HashSet::new();
    let mut errs = Vec::new();
    for e in export_to {
        let key = if e == "." { namespace } else { e.as_str() };
        if !seen.insert(key.to_string()) {
            if key != e {
                errs.push(format!(
                    "duplicate entries in exportTo: . and current namespace {namespace}"
                ));
            } else {
                errs.push(format!("duplicate entries in exportTo for entry {e}"));
            }
            continue;
        }
        let valid = e == "*" || e == "." || (e == "~" && is_service_entry) || is_dns1123_label(e);
        if !valid {
            errs.push(format!(
                "only .,*, or a valid DNS 1123 label is allowed as exportTo entry, found {e:?}"
            ));
        }
    }
    if seen.contains("*") && export_to.len() > 1 {
        errs.push(
            "cannot have both public (*) and non-public exportTo values for a resource".into(),
        );
    }
    if seen.contains("~") && export_to.len() > 1 {
        errs.push("cannot export service entry to no one (~) and someone".into());
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        assert!(wildcard_domain("*.example.com").is_ok());
        assert!(wildcard_domain("*").is_ok());
        assert!(wildcard_domain("reviews").is_ok());
        assert!(wildcard_domain("foo.*.com").is_err());
        assert!(wildcard_domain("").is_err());
        assert!(wildcard_domain("a.123").is_err());
        assert!(fqdn("istio.io.").is_ok());
        assert!(fqdn("bad_label.io").is_err());
    }

    #[test]
    fn subnets_and_ips() {
        assert!(ip_subnet("10.0.0.0/8").is_ok());
        assert!(ip_subnet("2001:db8::/32").is_ok());
        assert!(ip_subnet("1.2.3.4").is_ok());
        assert!(ip_subnet("1.2.3.4/33").is_err());
        assert!(ip_subnet("not-an-ip").is_err());
    }

    #[test]
    fn percentages_and_durations() {
        assert!(percent(100).is_ok());
        assert!(percent(101).is_err());
        assert!(percentage(0.00001).is_err());
        assert!(percentage(0.5).is_ok());
        let ms = |n| Duration(std::time::Duration::from_micros(n));
        assert!(duration(&ms(1000)).is_ok());
        assert!(duration(&ms(999)).is_err());
        assert!(duration(&ms(1500)).is_err());
    }

    #[test]
    fn export_to_rules() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(export_to("ns", &v(&[".", "other"]), false).is_ok());
        assert!(export_to("ns", &v(&[".", "ns"]), false).is_err());
        assert!(export_to("ns", &v(&["*", "other"]), false).is_err());
        assert!(export_to("ns", &v(&["~"]), false).is_err());
        assert!(export_to("ns", &v(&["~"]), true).is_ok());
        assert!(export_to("ns", &v(&["Bad_NS"]), false).is_err());
    }

    #[test]
    fn label_rules() {
        let mut l = BTreeMap::new();
        l.insert("app.kubernetes.io/name".to_string(), "x".to_string());
        assert!(labels(&l).is_ok());
        l.insert("bad key".to_string(), "x".to_string());
        assert!(labels(&l).is_err());
        let mut w = BTreeMap::new();
        w.insert("app".to_string(), "*".to_string());
        assert!(selector_labels(&w).is_err());
    }
}

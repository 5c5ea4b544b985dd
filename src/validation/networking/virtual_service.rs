//! VirtualService: hosts, gateways, delegation, unreachable and overlapping rules, TLS and TCP
//! routes (HTTP routes in `http`).

use super::http::{MESH_GATEWAY, gateway_names, http_route, route_destinations};
use crate::config::common::StringMatch;
use crate::config::host;
use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;
use std::collections::{BTreeMap, HashMap};

pub(in crate::validation) fn virtual_service(r: &mut Report, namespace: &str, vs: &VirtualService) {
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
pub(super) fn matches_json<'a, M: serde::Serialize>(
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
pub(super) fn unreachable_rules<'a>(
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
pub(super) struct PrefixMatch {
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

pub(super) fn exact_or_prefix(m: Option<&StringMatch>) -> String {
    match m {
        Some(StringMatch::Exact(v)) if !v.is_empty() => format!("exact:{v}"),
        Some(StringMatch::Prefix(v)) if !v.is_empty() => format!("prefix:{v}"),
        _ => String::new(),
    }
}

/// Whether every request `later` matches is matched by `earlier` (istiod's coveredValidation).
pub(super) fn covers(earlier: &PrefixMatch, later: &PrefixMatch) -> bool {
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
pub(super) fn overlapping_prefixes(r: &mut Report, path: &str, routes: &[HttpRoute]) {
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

/// Gateways route mesh mTLS by the SNI sidecars send, `outbound_.<port>_._.<host>`
/// (`outbound_.<port>_.<subset>_.<host>`); `None` when `sni` is not of that form.
pub(super) fn generated_sni(sni: &str) -> Option<Result<(), String>> {
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

pub(super) fn tls_route(r: &mut Report, path: &str, route: &TlsRoute, vs: &VirtualService) {
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

pub(super) fn tcp_route(r: &mut Report, path: &str, route: &TcpRoute) {
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

pub(super) fn l4_common(
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

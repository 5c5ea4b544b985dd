//! DestinationRule: host, subsets, traffic policies (connection pool, load balancer, outlier
//! detection, TLS), and the locality load-balancing settings MeshConfig shares with it.

use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;
use std::collections::{HashMap, HashSet};

pub(in crate::validation) fn destination_rule(
    r: &mut Report,
    namespace: &str,
    dr: &DestinationRule,
) {
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

pub(super) fn traffic_policy(r: &mut Report, path: &str, tp: &TrafficPolicy) {
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

pub(super) fn policy_parts(
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

pub(super) fn connection_pool(r: &mut Report, path: &str, pool: &ConnectionPoolSettings) {
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

pub(super) fn load_balancer(
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
pub(super) fn client_tls(r: &mut Report, path: &str, tls: &ClientTlsSettings) {
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

/// As istiod decides it (0 counts as prime there; the table-size rule catches it first).
pub(super) fn is_prime(x: u64) -> bool {
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

/// istiod's ValidateLocalityLbSetting (the failover warning is the caller's).
pub(super) fn locality_lb_setting(l: &LocalityLoadBalancerSetting) -> Result<(), String> {
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
pub(super) fn localities(list: &[&str]) -> Result<(), String> {
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

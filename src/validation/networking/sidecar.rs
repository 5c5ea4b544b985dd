//! Sidecar: ingress and egress listeners, outbound traffic policy.

use super::destination_rule::connection_pool;
use super::gateway::{namespace_slash_host, server_tls};
use super::http::destination;
use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;
use std::collections::{BTreeMap, HashSet};

pub(in crate::validation) fn sidecar(r: &mut Report, namespace: &str, sc: &Sidecar) {
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
    ingress_listeners(r, sc);
    egress_listeners(r, namespace, sc);
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

/// Each ingress listener: its port (unique), bind, default endpoint, TLS and connection pool.
fn ingress_listeners(r: &mut Report, sc: &Sidecar) {
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
}

/// Each egress listener: its port or Unix socket (unique; one catch-all, last), bind, capture
/// mode and hosts.
fn egress_listeners(r: &mut Report, namespace: &str, sc: &Sidecar) {
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
}

pub(super) fn sidecar_port(r: &mut Report, path: &str, port: &Port) {
    if !port.name.is_empty() {
        r.check(format!("{path}.name"), h::port_name(&port.name));
    }
    r.check(format!("{path}.protocol"), h::protocol(&port.protocol));
}

pub(super) fn default_endpoint(r: &mut Report, path: &str, endpoint: &str) {
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

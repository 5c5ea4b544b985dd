//! Gateway: servers, ports, hosts and TLS settings.

use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;
use std::collections::HashSet;

pub(in crate::validation) fn gateway(r: &mut Report, name: &str, gw: &Gateway) {
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

pub(super) fn gateway_server(r: &mut Report, path: &str, server: &Server) {
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
pub(super) fn cipher_suite_valid(cs: &str) -> bool {
    cs.is_empty()
        || cs == "ALL"
        || !cs.starts_with(|c: char| c.is_alphanumeric())
        || crate::config::networking::CIPHER_SUITES.contains(&cs)
}

/// istiod's validateTLSOptions for a server (gateways, Sidecar ingress).
pub(super) fn server_tls(r: &mut Report, path: &str, tls: &ServerTlsSettings) {
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
pub(super) fn namespace_slash_host(r: &mut Report, path: &str, hostname: &str, is_gateway: bool) {
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

pub(super) fn host_part(r: &mut Report, path: &str, hostname: &str, is_gateway: bool) {
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

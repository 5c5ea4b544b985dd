//! ServiceEntry, WorkloadEntry and WorkloadGroup.

use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;
use std::collections::{BTreeMap, HashSet};

/// `labels`: the object's, for `istio.io/use-waypoint`.
pub(in crate::validation) fn service_entry(
    r: &mut Report,
    namespace: &str,
    labels: &BTreeMap<String, String>,
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
        Resolution::DNS | Resolution::DNS_ROUND_ROBIN => dns_resolution(r, se, &names),
        Resolution::DYNAMIC_DNS => dynamic_dns(r, se, labels),
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

/// Resolution DNS and DNS_ROUND_ROBIN: hosts that resolve, endpoints that are addresses or names
/// with the entry's ports.
fn dns_resolution(r: &mut Report, se: &ServiceEntry, names: &HashSet<&str>) {
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
                protocol_in(
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

/// Resolution DYNAMIC_DNS: wildcard hosts only, no addresses or endpoints, HTTP or TLS ports.
fn dynamic_dns(r: &mut Report, se: &ServiceEntry, labels: &BTreeMap<String, String>) {
    let mode = "DYNAMIC_DNS";
    if se.hosts.is_empty() {
        r.error(
            "spec.hosts",
            format!("at least one wildcard host must be provided for resolution type {mode}"),
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
        .any(|p| !protocol_in(&p.protocol, &["HTTP", "TLS", "GRPC", "HTTP2"]))
    {
        r.error(
            "spec.ports",
            format!(
                "only HTTP, TLS, GRPC, and HTTP2 protocols are supported for resolution type {mode}"
            ),
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

/// `protocol` is one of `set`, case aside.
fn protocol_in(protocol: &str, set: &[&str]) -> bool {
    set.iter().any(|k| k.eq_ignore_ascii_case(protocol))
}

/// A WorkloadEntry object (addresses may be IPs, FQDNs or Unix sockets).
pub(in crate::validation) fn workload_entry(
    r: &mut Report,
    path: &str,
    we: &WorkloadEntry,
    _in_service_entry: bool,
) {
    workload_entry_in(r, path, we, None, true);
}

/// istiod's WorkloadEntry rule, for an object (`service_ports` none) or a STATIC ServiceEntry's
/// endpoint (its ports must be the ServiceEntry's, and its address an IP or a Unix socket).
pub(super) fn workload_entry_in(
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
pub(in crate::validation) fn workload_group(r: &mut Report, wg: &WorkloadGroup) {
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

/// A probe header name: an HTTP token, not a pseudo-header.
/// istiod's ValidateProbeHeaderName (as Kubernetes): letters, digits and `-` only.
pub(super) fn probe_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("header name cannot be empty".into());
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(format!("header name {name} is not a valid header name"));
    }
    Ok(())
}

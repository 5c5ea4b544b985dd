//! Which listeners, filter chains, filters, clusters, route configurations, virtual hosts and
//! routes a patch's `match` picks, as istiod's `*Match` functions.

use super::compile::Patch;
use crate::config::networking::{PatchContext, RouteAction};
pub(super) use crate::xds::generate::shared::util::listener_port;
use crate::xds::generate::typed_listener::Chain;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost, route};
use std::collections::BTreeMap;

/// Where a listener is, for filter chain matches.
pub(super) struct ListenerAt<'a> {
    pub(super) name: &'a str,
    pub(super) port: Option<u32>,
    /// Where captured traffic lands (`virtualInbound`, `virtualOutbound`).
    pub(super) capture: bool,
}

impl ListenerAt<'_> {
    fn is_virtual(&self) -> bool {
        self.capture
    }

    /// istiod's `listenerMatch` for patches below the listener: on the virtual listeners the
    /// port is matched per filter chain instead.
    pub(super) fn matches(&self, p: &Patch) -> bool {
        let Some(m) = &p.matching.listener else {
            return true;
        };
        if !m.name.is_empty() && m.name != self.name {
            return false;
        }
        if self.is_virtual() {
            return true;
        }
        m.port_number == 0 || self.port == Some(m.port_number)
    }

    pub(super) fn chain_matches(&self, fc: &Chain, p: &Patch) -> bool {
        let Some(m) = &p.matching.listener else {
            return true;
        };
        let fcm = fc.filter_chain_match.as_ref();
        let destination_port = fcm.and_then(|f| f.destination_port).map(|p| p.value);
        if self.is_virtual() && m.port_number > 0 && destination_port != Some(m.port_number) {
            return false;
        }
        let Some(cm) = &m.filter_chain else {
            return true;
        };
        if !cm.name.is_empty() && cm.name != fc.name {
            return false;
        }
        if !cm.sni.is_empty() && !fcm.is_some_and(|f| f.server_names.contains(&cm.sni)) {
            return false;
        }
        if !cm.transport_protocol.is_empty()
            && fcm.is_none_or(|f| f.transport_protocol != cm.transport_protocol)
        {
            return false;
        }
        if !cm.application_protocols.is_empty() {
            let Some(f) = fcm else {
                return false;
            };
            if !cm
                .application_protocols
                .split(',')
                .all(|a| f.application_protocols.iter().any(|x| x == a))
            {
                return false;
            }
        }
        if let Some(port) = cm.destination_port.filter(|p| *p > 0)
            && destination_port != Some(port)
        {
            return false;
        }
        true
    }
}

/// istiod's `listenerMatch` for LISTENER patches (the port always counts).
pub(super) fn listener_matches(l: &Listener, p: &Patch) -> bool {
    let Some(m) = &p.matching.listener else {
        return true;
    };
    (m.name.is_empty() || m.name == l.name)
        && (m.port_number == 0 || listener_port(l) == Some(m.port_number))
}

pub(super) fn network_filter_name(p: &Patch) -> Option<&str> {
    let f = p
        .matching
        .listener
        .as_ref()?
        .filter_chain
        .as_ref()?
        .filter
        .as_ref()?;
    Some(f.name.as_str())
}

pub(super) fn http_filter_name(p: &Patch) -> Option<&str> {
    let f = p
        .matching
        .listener
        .as_ref()?
        .filter_chain
        .as_ref()?
        .filter
        .as_ref()?;
    Some(f.sub_filter.as_ref()?.name.as_str())
}

/// istiod's `clusterMatch`: by name, else by the parts of `direction|port|subset|host`; an
/// inbound cluster's host is empty, so a service match looks at `inbound_hosts`, the services
/// selecting the workload port it serves.
pub(super) fn cluster_matches(
    c: &Cluster,
    p: &Patch,
    inbound_hosts: &BTreeMap<u32, Vec<String>>,
) -> bool {
    let Some(m) = &p.matching.cluster else {
        return true;
    };
    if !m.name.is_empty() {
        return m.name == c.name;
    }
    let mut parts = c.name.split('|');
    let (direction, port, subset, host) = (
        parts.next().unwrap_or(""),
        parts.next().and_then(|p| p.parse::<u32>().ok()),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let service_matches = || {
        let served = (direction == "inbound")
            .then(|| port.and_then(|p| inbound_hosts.get(&p)))
            .flatten()
            .filter(|h| !h.is_empty());
        match served {
            Some(hosts) => hosts.contains(&m.service),
            None => m.service == host,
        }
    };
    (m.subset.is_empty() || m.subset == subset)
        && (m.service.is_empty() || service_matches())
        && (m.port_number == 0 || port == Some(m.port_number))
}

/// istiod's `routeConfigurationMatch`: by name and port; on gateways also by the port name and
/// Gateway the route name carries (`https.443.<port name>.<gateway>.<namespace>`).
pub(super) fn route_configuration_matches(
    pctx: PatchContext,
    rc: &RouteConfiguration,
    p: &Patch,
) -> bool {
    let Some(m) = &p.matching.route_configuration else {
        return true;
    };
    if !m.name.is_empty() && m.name != rc.name {
        return false;
    }
    if pctx != PatchContext::GATEWAY {
        let port = if rc.name.starts_with("inbound|") {
            rc.name
                .split('|')
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok())
        } else {
            rc.name.parse::<u32>().ok()
        };
        return m.port_number == 0 || port == Some(m.port_number);
    }
    let parts: Vec<&str> = rc.name.split('.').collect();
    let port = parts.get(1).and_then(|p| p.parse::<u32>().ok());
    let (port_name, gateway) = match parts.as_slice() {
        [_, _, port_name, gw, ns] => (*port_name, format!("{ns}/{gw}")),
        _ => ("", String::new()),
    };
    (m.port_name.is_empty() || m.port_name == port_name)
        && (m.gateway.is_empty() || m.gateway == gateway)
        && (m.port_number == 0 || port == Some(m.port_number))
}

pub(super) fn virtual_host_matches(vh: &VirtualHost, p: &Patch) -> bool {
    let Some(m) = p
        .matching
        .route_configuration
        .as_ref()
        .and_then(|r| r.vhost.as_ref())
    else {
        return true;
    };
    (m.name.is_empty() || m.name == vh.name)
        && (m.domain_name.is_empty() || vh.domains.contains(&m.domain_name))
}

pub(super) fn route_match(p: &Patch) -> Option<&crate::config::networking::RouteMatch> {
    p.matching
        .route_configuration
        .as_ref()?
        .vhost
        .as_ref()?
        .route
        .as_ref()
}

pub(super) fn route_matches(
    r: &envoy_types::pb::envoy::config::route::v3::Route,
    p: &Patch,
) -> bool {
    let Some(m) = route_match(p) else {
        return true;
    };
    if !m.name.is_empty() && m.name != r.name {
        return false;
    }
    // As istiod: a route whose action is none of the three matches any action.
    match &r.action {
        _ if m.action == RouteAction::ANY => true,
        Some(route::Action::Route(_)) => m.action == RouteAction::ROUTE,
        Some(route::Action::Redirect(_)) => m.action == RouteAction::REDIRECT,
        Some(route::Action::DirectResponse(_)) => m.action == RouteAction::DIRECT_RESPONSE,
        _ => true,
    }
}

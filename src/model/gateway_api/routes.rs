//! Routes: HTTPRoute, GRPCRoute, TCPRoute and TLSRoute attached to their parents (istiod's
//! `extractParentReferenceInfo`, `referenceAllowed`), their rules converted into Istio routes
//! (`convertHTTPRoute`, `convertGRPCRoute`, ...), and merged into one VirtualService per
//! (listener, hostname) with the spec's precedence (`sortHTTPRoutes`).

use super::convert::{Converted, convert, sort_http_routes};
use super::listeners::gateway_key;
use super::outcome::{Condition, ParentOutcome, RouteOutcome, Translation};
use super::parents::{Grants, Parent, group_or_api};
use crate::config::gateway_api::{self as api, ParentReference};
use crate::config::networking::{self as istio, HttpMatchRequest};
use crate::config::{Config, ConfigKey, Kind, ObjectMeta, Spec, host};
use crate::model::origin::{Derived, Origin, RouteSemantics, Source};
use crate::store::Snapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The common shape of the four route kinds.
struct RouteView<'a> {
    config: &'a Arc<Config>,
    parent_refs: &'a [ParentReference],
    hostnames: &'a [String],
}

fn view(config: &Arc<Config>) -> Option<RouteView<'_>> {
    let (parent_refs, hostnames): (&[ParentReference], &[String]) = match &config.spec {
        Spec::HTTPRoute(r) => (&r.parent_refs, &r.hostnames),
        Spec::GRPCRoute(r) => (&r.parent_refs, &r.hostnames),
        Spec::TCPRoute(r) => (&r.parent_refs, &[]),
        Spec::TLSRoute(r) => (&r.parent_refs, &r.hostnames),
        _ => return None,
    };
    Some(RouteView {
        config,
        parent_refs,
        hostnames,
    })
}

/// A parent a route refers to, resolved: a listener of one of our Gateways, or the hosts of a
/// Service or ServiceEntry (mesh), or a mesh parent that does not exist.
enum Resolved<'a> {
    Listener(&'a Parent, Option<Condition>),
    Mesh {
        hosts: Vec<String>,
        /// The Service's (ServiceEntry's) namespace: a route there is the producer's.
        namespace: String,
        port: Option<u32>,
    },
    MissingMesh(Condition),
}

/// The networking group, as a parentRef names a ServiceEntry.
const ISTIO_NETWORKING: &str = "networking.istio.io";

/// A Service or ServiceEntry parent (GAMMA), as istiod's `referenceAllowed`: it must exist; a
/// Service's route applies to its cluster-local name, a ServiceEntry's to each of its hosts.
fn resolve_mesh<'a>(
    snapshot: &Snapshot,
    kind: Kind,
    ns: String,
    name: &str,
    port: Option<u32>,
    suffix: &str,
) -> Resolved<'a> {
    let Some(entry) = snapshot.get_named(kind, &ns, name) else {
        let what = if kind == Kind::Service {
            "service"
        } else {
            "service entry"
        };
        return Resolved::MissingMesh(Condition::failed(
            "NoMatchingParent",
            format!("parent {what}: {name:?} not found"),
        ));
    };
    let hosts = match &entry.config.spec {
        Spec::ServiceEntry(se) => se.hosts.clone(),
        _ => vec![format!("{name}.{ns}.svc.{suffix}")],
    };
    Resolved::Mesh {
        hosts,
        namespace: ns,
        port,
    }
}

/// Which of our parents `r` names, with why each denies the route (istiod's `referenceAllowed`).
fn resolve<'a>(
    snapshot: &Snapshot,
    route: &RouteView,
    r: &ParentReference,
    parents: &'a [Parent],
    suffix: &str,
) -> Vec<Resolved<'a>> {
    let route_ns = &route.config.metadata.namespace;
    let group = r.group.as_deref().unwrap_or(api::GROUP);
    let kind = r.kind.as_deref().unwrap_or("Gateway");
    let ns = r.namespace.clone().unwrap_or_else(|| route_ns.clone());
    match (group, kind) {
        ("", "Service") => {
            return vec![resolve_mesh(
                snapshot,
                Kind::Service,
                ns,
                &r.name,
                r.port,
                suffix,
            )];
        }
        (ISTIO_NETWORKING, "ServiceEntry") => {
            return vec![resolve_mesh(
                snapshot,
                Kind::ServiceEntry,
                ns,
                &r.name,
                r.port,
                suffix,
            )];
        }
        _ => {}
    }
    let parent_kind = match (group == api::GROUP, kind) {
        (true, "Gateway") => Kind::KubernetesGateway,
        (true, "ListenerSet") => Kind::ListenerSet,
        _ => return Vec::new(),
    };
    let of_gateway: Vec<&Parent> = parents
        .iter()
        .filter(|p| p.kind == parent_kind && p.gateway.0 == ns && p.gateway.1 == r.name)
        .collect();
    let route_kind = route.config.kind.name();
    of_gateway
        .iter()
        .map(|p| Resolved::Listener(p, denied(route, r, p, route_kind, route_ns)))
        .collect()
}

fn denied(
    route: &RouteView,
    r: &ParentReference,
    p: &Parent,
    route_kind: &str,
    route_ns: &str,
) -> Option<Condition> {
    if let Some(port) = r.port
        && port != p.port
    {
        return Some(Condition::failed(
            "NoMatchingParent",
            format!("port {port} not found"),
        ));
    }
    if let Some(section) = &r.section_name
        && *section != p.section_name
    {
        return Some(Condition::failed(
            "NoMatchingParent",
            format!("sectionName {section:?} not found"),
        ));
    }
    let route_hosts: Vec<&str> = if route.hostnames.is_empty() {
        vec!["*"]
    } else {
        route.hostnames.iter().map(String::as_str).collect()
    };
    let mut host_matched = false;
    let mut matched = false;
    'out: for rh in &route_hosts {
        for ph in &p.hosts {
            let (pns, phost) = ph.split_once('/').unwrap_or(("*", ph.as_str()));
            let hm = host::matches(phost, rh);
            host_matched |= hm;
            if hm && (pns == "*" || pns == route_ns) {
                matched = true;
                break 'out;
            }
        }
    }
    if !matched {
        return Some(if host_matched {
            Condition::failed(
                "NotAllowedByListeners",
                format!(
                    "hostnames matched parent hostname {:?}, but namespace {route_ns:?} is not allowed by the parent",
                    p.hostname
                ),
            )
        } else {
            Condition::failed(
                "NoMatchingListenerHostname",
                format!("no hostnames matched parent hostname {:?}", p.hostname),
            )
        });
    }
    let allowed = p
        .allowed_kinds
        .iter()
        .any(|k| k.kind == route_kind && group_or_api(&k.group) == api::GROUP);
    if !allowed {
        return Some(Condition::failed(
            "NotAllowedByListeners",
            format!("kind {}/{route_kind} is not allowed", api::GROUP),
        ));
    }
    None
}

/// The most telling of several outcomes for one parent reference (istiod ranks: no error, not
/// allowed, no hostname, not accepted; equal ranks join their messages).
fn collapse(results: Vec<Option<Condition>>) -> (Option<Condition>, usize) {
    let rank = |c: &Option<Condition>| match c.as_ref().map(|c| c.reason.as_str()) {
        None => 0,
        Some("NotAllowedByListeners") => 1,
        Some("NoMatchingListenerHostname") => 2,
        Some(_) => 4,
    };
    let successes = results.iter().filter(|r| r.is_none()).count();
    let mut best: Option<Option<Condition>> = None;
    for r in results {
        best = Some(match best {
            None => r,
            Some(b) if rank(&r) < rank(&b) => r,
            Some(Some(mut b)) if rank(&r) == rank(&Some(b.clone())) => {
                if let Some(r) = r {
                    b.message = format!("{}; {}", b.message, r.message);
                }
                Some(b)
            }
            Some(b) => b,
        });
    }
    (best.flatten(), successes)
}

/// Attaches and converts every route; fills the VirtualServices and outcomes of `out`.
pub(super) fn routes(
    snapshot: &Snapshot,
    suffix: &str,
    grants: &Grants,
    parents: &[Parent],
    out: &mut Translation,
) {
    // (merge key) → (namespace, parents annotation, routes) for HTTP; TCP/TLS one each.
    let mut merged: BTreeMap<String, MergedVs> = BTreeMap::new();
    let mut attached: BTreeMap<(Kind, String, String, usize), u32> = BTreeMap::new();
    let mut all: Vec<&Arc<Config>> = [
        Kind::HTTPRoute,
        Kind::GRPCRoute,
        Kind::TCPRoute,
        Kind::TLSRoute,
    ]
    .iter()
    .flat_map(|k| snapshot.list(*k))
    .map(|e| &e.config)
    .collect();
    all.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    for config in all {
        let Some(route) = view(config) else { continue };
        let mut outcome = RouteOutcome {
            generation: config.metadata.generation,
            ..Default::default()
        };
        let mut gateway_conv: Option<Converted> = None;
        let mut mesh_conv: Option<Converted> = None;
        for r in route.parent_refs {
            let resolved = resolve(snapshot, &route, r, parents, suffix);
            if resolved.is_empty() {
                continue;
            }
            let mut results = Vec::new();
            let mut route_error = None;
            for res in resolved {
                match res {
                    Resolved::Listener(p, deny) => {
                        let conv = gateway_conv.get_or_insert_with(|| {
                            convert(config, suffix, grants, true, &mut outcome.backends)
                        });
                        route_error = route_error.or(conv.error.clone());
                        if deny.is_none() {
                            *attached
                                .entry((
                                    p.kind,
                                    p.gateway.0.clone(),
                                    p.gateway.1.clone(),
                                    p.listener_index,
                                ))
                                .or_default() += 1;
                            bind_to_listener(&route, p, parents, conv, &mut merged);
                        }
                        results.push(deny);
                    }
                    Resolved::Mesh {
                        hosts,
                        namespace,
                        port,
                    } => {
                        out.reads_mesh_parents = true;
                        let conv = mesh_conv.get_or_insert_with(|| {
                            convert(config, suffix, grants, false, &mut outcome.backends)
                        });
                        route_error = route_error.or(conv.error.clone());
                        for host in &hosts {
                            bind_to_service(&route, host, &namespace, port, conv, &mut merged);
                        }
                        results.push(None);
                    }
                    Resolved::MissingMesh(deny) => {
                        out.reads_mesh_parents = true;
                        results.push(Some(deny));
                    }
                }
            }
            let (deny, successes) = collapse(results);
            let message = if successes > 1 {
                format!("Route was valid, bound to {successes} parents")
            } else {
                "Route was valid".to_string()
            };
            outcome.parents.push(ParentOutcome {
                parent_ref: r.clone(),
                accepted: deny.unwrap_or_else(|| Condition::ok("Accepted", &message)),
                route_error: route_error.map(|e| Condition::failed(e.reason, e.message)),
            });
        }
        outcome.backends.sort();
        outcome.backends.dedup();
        if !outcome.parents.is_empty() {
            out.route_outcomes.insert(config.key(), outcome);
        }
    }
    for ((kind, gw_ns, gw_name, index), count) in attached {
        let key = ConfigKey {
            kind,
            ..gateway_key(&gw_ns, &gw_name)
        };
        if let Some(o) = out.gateway_outcomes.get_mut(&key)
            && let Some(l) = o.listeners.get_mut(index)
        {
            l.attached_routes = count;
        }
    }
    for (key, vs) in merged {
        out.virtual_services.push(vs.into_derived(&key));
    }
}

/// One derived VirtualService being assembled.
struct MergedVs {
    namespace: String,
    creation: Option<String>,
    parents: Vec<Source>,
    host: String,
    gateways: Vec<String>,
    export_to: Vec<String>,
    http: Vec<istio::HttpRoute>,
    tcp: Vec<istio::TcpRoute>,
    tls: Vec<istio::TlsRoute>,
}

impl MergedVs {
    fn into_derived(mut self, key: &str) -> Derived {
        sort_http_routes(&mut self.http);
        let origin = Origin {
            route_semantics: Some(RouteSemantics::Gateway),
            sources: self.parents,
            gateway_services: None,
        };
        let config = Config {
            api_version: "networking.istio.io/v1".into(),
            kind: Kind::VirtualService,
            metadata: ObjectMeta {
                name: key.replace('/', "~"),
                namespace: self.namespace,
                creation_timestamp: self.creation,
                ..Default::default()
            },
            spec: Spec::VirtualService(istio::VirtualService {
                hosts: vec![self.host],
                gateways: self.gateways,
                http: self.http,
                tls: self.tls,
                tcp: self.tcp,
                export_to: self.export_to,
            }),
            status: None,
        };
        Derived::new(config, origin)
    }
}

fn merge_into(
    merged: &mut BTreeMap<String, MergedVs>,
    key: String,
    route: &RouteView,
    host: &str,
    gateway: &str,
    export_to: Vec<String>,
    conv: &Converted,
) {
    let meta = &route.config.metadata;
    let entry = merged.entry(key).or_insert_with(|| MergedVs {
        namespace: meta.namespace.clone(),
        creation: meta.creation_timestamp.clone(),
        parents: Vec::new(),
        host: host.to_string(),
        gateways: vec![gateway.to_string()],
        export_to,
        http: Vec::new(),
        tcp: Vec::new(),
        tls: Vec::new(),
    });
    let parent = Source::new(route.config.kind, &meta.name, None, &meta.namespace);
    if !entry.parents.contains(&parent) {
        entry.parents.push(parent);
    }
    entry.http.extend(conv.http.iter().cloned());
    entry.tcp.extend(conv.tcp.iter().cloned());
    entry.tls.extend(conv.tls.iter().cloned());
}

/// A route bound to a listener: one VirtualService per route hostname the listener isolation
/// allows, merged with other routes' for the same (listener, hostname).
fn bind_to_listener(
    route: &RouteView,
    p: &Parent,
    parents: &[Parent],
    conv: &Converted,
    merged: &mut BTreeMap<String, MergedVs>,
) {
    // Hostnames of the Gateway's other listeners on this port and protocol: a route hostname a
    // more specific one matches belongs there (listener isolation).
    let banned: Vec<&str> = parents
        .iter()
        .filter(|o| {
            o.gateway == p.gateway
                && o.section_name != p.section_name
                && o.port == p.port
                && o.protocol == p.protocol
                && o.hostname != p.hostname
        })
        .map(|o| o.hostname.as_str())
        .collect();
    let hosts: Vec<String> = if route.hostnames.is_empty() {
        vec!["*".into()]
    } else {
        route.hostnames.to_vec()
    };
    let is_l4 = matches!(route.config.kind, Kind::TCPRoute | Kind::TLSRoute);
    for h in hosts {
        if !allowed_by_isolation(&h, &p.hostname, &banned) {
            continue;
        }
        let mut conv_here = Converted {
            http: conv.http.clone(),
            tcp: conv.tcp.clone(),
            tls: conv.tls.clone(),
            error: None,
        };
        if route.config.kind == Kind::TLSRoute && !p.hostname.is_empty() {
            for t in &mut conv_here.tls {
                for m in &mut t.matches {
                    m.sni_hosts = intersect(&m.sni_hosts, &p.hostname);
                }
            }
        }
        let key = if is_l4 {
            format!(
                "{}/{}/{}/{}",
                p.internal_name, route.config.metadata.namespace, route.config.metadata.name, h
            )
        } else {
            format!("{}/{h}", p.internal_name)
        };
        merge_into(
            merged,
            key,
            route,
            &h,
            &p.internal_name,
            Vec::new(),
            &conv_here,
        );
    }
}

/// A GAMMA route: a VirtualService for the mesh on one host of a Service or ServiceEntry (of
/// `service_ns`). A route in the service's namespace applies to every client; one elsewhere
/// only to clients of its own namespace, and before the service's own (istiod's consumer and
/// producer routes).
fn bind_to_service(
    route: &RouteView,
    service_host: &str,
    service_ns: &str,
    port: Option<u32>,
    conv: &Converted,
    merged: &mut BTreeMap<String, MergedVs>,
) {
    let route_ns = &route.config.metadata.namespace;
    let mut conv_here = Converted {
        http: conv.http.clone(),
        tcp: conv.tcp.clone(),
        tls: conv.tls.clone(),
        error: None,
    };
    if let Some(port) = port {
        for r in &mut conv_here.http {
            if r.matches.is_empty() {
                r.matches.push(HttpMatchRequest::default());
            }
            for m in &mut r.matches {
                m.port = port;
            }
        }
        for r in &mut conv_here.tcp {
            if r.matches.is_empty() {
                r.matches.push(istio::L4MatchAttributes::default());
            }
            for m in &mut r.matches {
                m.port = port;
            }
        }
    }
    let export_to = if route_ns == service_ns {
        vec!["*".to_string()]
    } else {
        vec![".".to_string()]
    };
    let key = match port {
        Some(p) => format!("{route_ns}/{p}/{service_host}"),
        None => format!("{route_ns}/{service_host}"),
    };
    merge_into(
        merged,
        key,
        route,
        service_host,
        "mesh",
        export_to,
        &conv_here,
    );
}

/// istiod's `hostnameAllowedByIsolation`: a route hostname served by a more specific listener
/// of the same port is not served by this one.
fn allowed_by_isolation(route_host: &str, listener: &str, banned: &[&str]) -> bool {
    if !listener.is_empty() && !listener.starts_with('*') {
        return true;
    }
    if !listener.is_empty() && !host::matches(route_host, listener) {
        return false;
    }
    for other in banned {
        if listener.len() > other.len() {
            continue;
        }
        if !other.is_empty() && host::subset_of(route_host, other) {
            return false;
        }
    }
    true
}

/// The SNI names of `sni` within listener hostname `listener` (the more specific of each pair).
fn intersect(sni: &[String], listener: &str) -> Vec<String> {
    sni.iter()
        .filter_map(|h| {
            if host::subset_of(h, listener) {
                Some(h.clone())
            } else if host::subset_of(listener, h) {
                Some(listener.to_string())
            } else {
                None
            }
        })
        .collect()
}

//! EnvoyFilter patches, the last finishing pass, as istiod applies them
//! (`pilot/pkg/networking/core/envoyfilter`, `pilot/pkg/model/envoyfilter.go`): the EnvoyFilters
//! that attach to a proxy (the one attachment rule: root namespace, then its own, selector or
//! targetRefs) in istiod's order (priority, root namespace first, oldest, name), their patches
//! matched by context, listener, filter chain, filter, route configuration, virtual host, route and
//! cluster, and applied on the typed resources: MERGE is protobuf merge on the real Envoy type
//! ([`crate::envoy::proto_merge`]), never on JSON text.
//!
//! Each EnvoyFilter's patch values are read once per push context ([`compiled`]); a value that
//! does not read as its Envoy type is skipped, logged and listed in `/debug/envoy_filters` with the
//! reason, the rest of the EnvoyFilter still applies. Not applied (and warned about by `rudder
//! validate` and admission): BOOTSTRAP patches.

mod compile;
mod matches;

pub use compile::{
    Compiled, Patch, Skipped, compiled, envoy_filters, extension_config, patches_for, patching,
};

use crate::config::networking::{ApplyTo, PatchContext, PatchOperation};
use crate::envoy::proto_merge::{apply_plan, merge_any};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Built, Class, Pass, Typed};
use crate::xds::generate::typed_listener::{
    Chain, HTTP_CONNECTION_MANAGER, ListenerRole, NetworkFilter, TypedListener,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use envoy_types::pb::google::protobuf::Any;
use matches::{
    ListenerAt, cluster_matches, http_filter_name, listener_matches, listener_port,
    network_filter_name, route_configuration_matches, route_match, route_matches,
    virtual_host_matches,
};

/// The EnvoyFilter match context of a resource's class; proxyless gRPC takes no patches.
fn context(class: Class) -> Option<PatchContext> {
    Some(match class {
        Class::SidecarInbound => PatchContext::SIDECAR_INBOUND,
        Class::SidecarOutbound => PatchContext::SIDECAR_OUTBOUND,
        Class::Gateway => PatchContext::GATEWAY,
        Class::Waypoint => PatchContext::WAYPOINT,
        Class::Proxyless | Class::ProxylessServer | Class::Ztunnel => return None,
    })
}

/// The pass: EnvoyFilter patches on a scope's clusters, listeners and route configurations.
pub struct EnvoyFilterPatches;

impl Pass for EnvoyFilterPatches {
    fn name(&self) -> &'static str {
        "envoy_filter"
    }

    fn applies(&self, ctx: &PushContext, scope: &ScopeView) -> bool {
        !patches_for(ctx, scope).is_empty()
    }

    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>) {
        let patches = patches_for(ctx, scope);
        let of = |apply_to: ApplyTo| -> Vec<&Patch> {
            patches
                .iter()
                .filter(|p| p.apply_to == apply_to)
                .map(|p| p.as_ref())
                .collect()
        };
        let set = PatchSet {
            cluster: of(ApplyTo::CLUSTER),
            listener: of(ApplyTo::LISTENER),
            filter_chain: of(ApplyTo::FILTER_CHAIN),
            network_filter: of(ApplyTo::NETWORK_FILTER),
            http_filter: of(ApplyTo::HTTP_FILTER),
            route_configuration: of(ApplyTo::ROUTE_CONFIGURATION),
            virtual_host: of(ApplyTo::VIRTUAL_HOST),
            http_route: of(ApplyTo::HTTP_ROUTE),
            listener_filter: of(ApplyTo::LISTENER_FILTER),
        };
        let mut has_clusters = false;
        let mut has_listeners = false;
        resources.retain_mut(|r| {
            let Some(pctx) = context(r.class) else {
                return true;
            };
            match &mut r.built {
                Built::Cluster(c) => {
                    has_clusters = true;
                    set.patch_cluster(pctx, c, &scope.inbound_hosts)
                }
                Built::Listener(l) => {
                    has_listeners = true;
                    set.patch_listener(pctx, l)
                }
                Built::Route(rc) => {
                    set.patch_route_configuration(pctx, rc);
                    true
                }
                _ => true,
            }
        });
        // ADDs, for the contexts the proxy has: an ADD without a context adds for sidecar
        // outbound and gateways only, as istiod.
        let outbound = Class::outbound(scope);
        let classes = match outbound {
            Class::SidecarOutbound => vec![Class::SidecarOutbound, Class::SidecarInbound],
            other => vec![other],
        };
        for class in classes {
            let Some(pctx) = context(class) else {
                continue;
            };
            if has_clusters {
                for p in set.cluster.iter().filter(|p| adds_here(p, pctx)) {
                    let c: Cluster = p.value();
                    resources.push(Typed::new(c.name.clone(), class, c));
                }
            }
            if has_listeners {
                for p in set.listener.iter().filter(|p| adds_here(p, pctx)) {
                    let l: Listener = p.value();
                    resources.push(Typed::new(l.name.clone(), class, TypedListener::decoded(l)));
                }
            }
        }
    }
}

/// An ADD of this patch applies in context `pctx`: without a context of its own it adds for
/// sidecar outbound and gateways only, as istiod.
fn adds_here(p: &Patch, pctx: PatchContext) -> bool {
    p.operation == PatchOperation::ADD
        && p.context_matches(pctx)
        && (p.matching.context != PatchContext::ANY
            || matches!(pctx, PatchContext::SIDECAR_OUTBOUND | PatchContext::GATEWAY))
}

/// A scope's patches by what they apply to, in order.
struct PatchSet<'a> {
    cluster: Vec<&'a Patch>,
    listener: Vec<&'a Patch>,
    filter_chain: Vec<&'a Patch>,
    network_filter: Vec<&'a Patch>,
    http_filter: Vec<&'a Patch>,
    route_configuration: Vec<&'a Patch>,
    virtual_host: Vec<&'a Patch>,
    http_route: Vec<&'a Patch>,
    listener_filter: Vec<&'a Patch>,
}

/// A MERGE patch on one filter (network or HTTP), given its name and typed config and the
/// patch value's: the value's name replaces the filter's when it has one, and its typed config
/// is merged into the filter's (a merge that fails is logged and leaves the config as it was).
fn merge_filter(
    p: &Patch,
    (name, current): (&mut String, &mut Any),
    (value_name, patch): (&str, Option<&Any>),
) {
    let next = patch.and_then(|patch| {
        merge_any(current, patch)
            .inspect_err(|e| merged::<_>(p, Err(e.to_string())))
            .ok()
    });
    if !value_name.is_empty() {
        *name = value_name.to_string();
    }
    if let Some(next) = next {
        *current = next;
    }
}

/// Logs a merge that could not be made (the resource is left as it was).
fn merged<E: std::fmt::Display>(p: &Patch, result: Result<(), E>) {
    if let Err(e) = result {
        tracing::warn!(envoy_filter = %format!("{}/{}", p.filter.namespace, p.filter.name), patch = p.index, error = %e, "EnvoyFilter merge not applied");
    }
}

impl PatchSet<'_> {
    /// Patches a cluster; `false` when a patch removes it.
    fn patch_cluster(
        &self,
        pctx: PatchContext,
        c: &mut Cluster,
        inbound_hosts: &std::collections::BTreeMap<u32, Vec<String>>,
    ) -> bool {
        for p in &self.cluster {
            if !p.context_matches(pctx) || !cluster_matches(c, p, inbound_hosts) {
                continue;
            }
            match p.operation {
                PatchOperation::REMOVE => return false,
                PatchOperation::MERGE => {
                    let value: Cluster = p.value();
                    if !merge_cluster_transport_socket(c, &value) {
                        merged(p, apply_plan(c, &p.plan));
                    }
                }
                _ => {}
            }
        }
        true
    }

    /// Patches a listener, its filter chains and their filters; `false` when a patch removes it.
    fn patch_listener(&self, pctx: PatchContext, l: &mut TypedListener) -> bool {
        for p in &self.listener {
            if !p.context_matches(pctx) || !listener_matches(&l.listener, p) {
                continue;
            }
            match p.operation {
                PatchOperation::REMOVE => return false,
                PatchOperation::MERGE => merged(p, l.edit_encoded(|l| apply_plan(l, &p.plan))),
                _ => {}
            }
        }
        let name = l.name().to_string();
        let port = listener_port(&l.listener);
        let at = ListenerAt {
            name: &name,
            port,
            capture: l.role == ListenerRole::Capture,
        };
        self.patch_listener_filters(pctx, &at, &mut l.listener.listener_filters);
        let mut chains = std::mem::take(&mut l.chains);
        chains.retain_mut(|fc| fc.filters.is_empty() || self.patch_filter_chain(pctx, &at, fc));
        if let Some(mut fc) = l.default_chain.take()
            && (fc.filters.is_empty() || self.patch_filter_chain(pctx, &at, &mut fc))
        {
            l.default_chain = Some(fc);
        }
        for p in &self.filter_chain {
            if p.operation == PatchOperation::ADD && p.context_matches(pctx) && at.matches(p) {
                chains.push(Chain::decoded(p.value()));
            }
        }
        l.chains = chains;
        true
    }

    /// LISTENER_FILTER patches, as istiod's `patchListenerFilters`: the ordered operations by
    /// `listener.listenerFilter` name; a MERGE goes into the typed config of each listener
    /// filter of the same type.
    fn patch_listener_filters(
        &self,
        pctx: PatchContext,
        at: &ListenerAt,
        filters: &mut Vec<ListenerFilter>,
    ) {
        for p in &self.listener_filter {
            if !p.context_matches(pctx) || !at.matches(p) {
                continue;
            }
            let wanted = p
                .matching
                .listener
                .as_ref()
                .and_then(|l| l.listener_filter.as_deref())
                .filter(|n| !n.is_empty());
            if p.operation != PatchOperation::MERGE {
                ordered_op(
                    filters,
                    p,
                    wanted.is_some(),
                    |f: &ListenerFilter| wanted.is_none_or(|w| w == f.name),
                    || p.value(),
                );
                continue;
            }
            if wanted.is_none() {
                continue;
            }
            let value: ListenerFilter = p.value();
            let Some(listener_filter::ConfigType::TypedConfig(patch)) = &value.config_type else {
                continue;
            };
            for f in filters.iter_mut() {
                if let Some(listener_filter::ConfigType::TypedConfig(current)) = &f.config_type
                    && current.type_url == patch.type_url
                    && let Ok(next) = merge_any(current, patch)
                {
                    f.config_type = Some(listener_filter::ConfigType::TypedConfig(next));
                }
            }
        }
    }

    /// Patches a filter chain and its filters; `false` when a patch removes it.
    fn patch_filter_chain(&self, pctx: PatchContext, at: &ListenerAt, fc: &mut Chain) -> bool {
        for p in &self.filter_chain {
            if !p.context_matches(pctx) || !at.matches(p) || !at.chain_matches(fc, p) {
                continue;
            }
            match p.operation {
                PatchOperation::REMOVE => return false,
                PatchOperation::MERGE => {
                    let value: FilterChain = p.value();
                    if !merge_chain_transport_socket(&mut fc.transport_socket, &value) {
                        merged(p, fc.edit_encoded(|fc| apply_plan(fc, &p.plan)));
                    }
                }
                _ => {}
            }
        }
        self.patch_network_filters(pctx, at, fc);
        true
    }

    fn patch_network_filters(&self, pctx: PatchContext, at: &ListenerAt, fc: &mut Chain) {
        let keep = |p: &&Patch| p.context_matches(pctx) && at.matches(p) && at.chain_matches(fc, p);
        let network: Vec<&Patch> = self.network_filter.iter().copied().filter(keep).collect();
        let http: Vec<&Patch> = self.http_filter.iter().copied().filter(keep).collect();
        for p in &network {
            let wanted = network_filter_name(p);
            ordered_op(
                &mut fc.filters,
                p,
                wanted.is_some(),
                |f: &NetworkFilter| wanted.is_none_or(|w| w == f.name),
                || NetworkFilter::decoded(p.value()),
            );
        }
        for f in &mut fc.filters {
            for p in &network {
                if p.operation != PatchOperation::MERGE
                    || network_filter_name(p).is_some_and(|w| w != f.name)
                {
                    continue;
                }
                let value: Filter = p.value();
                // Merged as protos: a connection manager or TCP proxy is packed for it.
                let Some(mut current) = f.typed_config() else {
                    continue;
                };
                let patch = match &value.config_type {
                    Some(filter::ConfigType::TypedConfig(patch)) => Some(patch),
                    _ => None,
                };
                merge_filter(p, (&mut f.name, &mut current), (&value.name, patch));
                f.set_typed_config(current);
            }
            if f.name == HTTP_CONNECTION_MANAGER
                && !http.is_empty()
                && let Some(hcm) = f.http_connection_manager_mut()
            {
                patch_http_filters(&http, hcm);
            }
        }
    }

    fn patch_route_configuration(&self, pctx: PatchContext, rc: &mut RouteConfiguration) {
        fn matching<'p>(
            patches: &[&'p Patch],
            pctx: PatchContext,
            rc: &RouteConfiguration,
        ) -> Vec<&'p Patch> {
            patches
                .iter()
                .copied()
                .filter(|p| p.context_matches(pctx) && route_configuration_matches(pctx, rc, p))
                .collect()
        }
        let on_rc = matching(&self.route_configuration, pctx, rc);
        let hosts = matching(&self.virtual_host, pctx, rc);
        let routes = matching(&self.http_route, pctx, rc);
        for p in on_rc {
            if p.operation == PatchOperation::MERGE {
                merged(p, apply_plan(rc, &p.plan));
            }
        }
        let mut vhosts = std::mem::take(&mut rc.virtual_hosts);
        vhosts.retain_mut(|vh| {
            for p in &hosts {
                if !virtual_host_matches(vh, p) {
                    continue;
                }
                match p.operation {
                    PatchOperation::REMOVE => return false,
                    PatchOperation::MERGE => merged(p, apply_plan(vh, &p.plan)),
                    PatchOperation::REPLACE => *vh = p.value(),
                    _ => {}
                }
            }
            patch_http_routes(&routes, vh);
            true
        });
        for p in hosts.iter().filter(|p| p.operation == PatchOperation::ADD) {
            vhosts.push(p.value());
        }
        rc.virtual_hosts = vhosts;
    }
}

/// Applies the ordered operations (ADD, INSERT_*, REPLACE, REMOVE) of patch `p` to `items`, as
/// istiod does for network filters, HTTP filters and routes: `targeted` says whether the patch
/// names an item to act next to; without one an insert goes first or last and REPLACE and
/// REMOVE do nothing.
fn ordered_op<T>(
    items: &mut Vec<T>,
    p: &Patch,
    targeted: bool,
    is_target: impl Fn(&T) -> bool,
    value: impl Fn() -> T,
) {
    let first = items.iter().position(&is_target);
    match p.operation {
        PatchOperation::ADD => items.push(value()),
        PatchOperation::INSERT_FIRST => items.insert(0, value()),
        PatchOperation::INSERT_AFTER if !targeted => items.push(value()),
        PatchOperation::INSERT_BEFORE if !targeted => items.insert(0, value()),
        PatchOperation::INSERT_AFTER => {
            if let Some(i) = first {
                items.insert(i + 1, value());
            }
        }
        PatchOperation::INSERT_BEFORE => {
            if let Some(i) = first {
                items.insert(i, value());
            }
        }
        PatchOperation::REPLACE if targeted => {
            if let Some(i) = first {
                items[i] = value();
            }
        }
        PatchOperation::REMOVE if targeted => items.retain(|x| !is_target(x)),
        _ => {}
    }
}

/// HTTP_FILTER patches on one HTTP connection manager.
fn patch_http_filters(patches: &[&Patch], hcm: &mut HttpConnectionManager) {
    for p in patches {
        let wanted = http_filter_name(p);
        ordered_op(
            &mut hcm.http_filters,
            p,
            wanted.is_some(),
            |f: &HttpFilter| wanted.is_none_or(|w| w == f.name),
            || p.value(),
        );
    }
    for f in &mut hcm.http_filters {
        for p in patches {
            if p.operation != PatchOperation::MERGE
                || http_filter_name(p).is_some_and(|w| w != f.name)
            {
                continue;
            }
            let Some(http_filter::ConfigType::TypedConfig(current)) = &mut f.config_type else {
                continue;
            };
            let value: HttpFilter = p.value();
            let patch = match &value.config_type {
                Some(http_filter::ConfigType::TypedConfig(patch)) => Some(patch),
                _ => None,
            };
            merge_filter(p, (&mut f.name, current), (&value.name, patch));
        }
    }
}

/// HTTP_ROUTE patches on one virtual host's routes.
fn patch_http_routes(patches: &[&Patch], vh: &mut VirtualHost) {
    let on_host: Vec<&Patch> = patches
        .iter()
        .copied()
        .filter(|p| virtual_host_matches(vh, p))
        .collect();
    vh.routes.retain_mut(|r| {
        for p in &on_host {
            if !route_matches(r, p) {
                continue;
            }
            match p.operation {
                PatchOperation::REMOVE => return false,
                PatchOperation::MERGE => merged(p, apply_plan(r, &p.plan)),
                _ => {}
            }
        }
        true
    });
    for p in &on_host {
        let targeted = route_match(p).is_some();
        match p.operation {
            // istiod: INSERT_FIRST with a route match inserts first only when that route exists.
            PatchOperation::INSERT_FIRST if targeted => {
                let present = vh.routes.iter().any(|r| route_matches(r, p));
                if present {
                    vh.routes.insert(0, p.value());
                }
            }
            PatchOperation::ADD
            | PatchOperation::INSERT_FIRST
            | PatchOperation::INSERT_BEFORE
            | PatchOperation::INSERT_AFTER => ordered_op(
                &mut vh.routes,
                p,
                targeted,
                |r| route_matches(r, p),
                || p.value(),
            ),
            _ => {}
        }
    }
}

/// istiod's `mergeTransportSocketCluster`: a patch carrying a transport socket changes only the
/// transport socket (deep-merged into one of the same name, else replacing it); `false` when the
/// patch has none and is merged as a whole.
fn merge_cluster_transport_socket(c: &mut Cluster, value: &Cluster) -> bool {
    let Some(patch) = &value.transport_socket else {
        return false;
    };
    if !c.transport_socket_matches.is_empty() {
        if let Some(ts) = c
            .transport_socket_matches
            .iter_mut()
            .filter_map(|m| m.transport_socket.as_mut())
            .find(|ts| ts.name == patch.name)
        {
            merge_socket_config(ts, patch);
        }
        return true;
    }
    match c.transport_socket.as_mut() {
        Some(ts) if ts.name == patch.name => merge_socket_config(ts, patch),
        _ => c.transport_socket = Some(patch.clone()),
    }
    true
}

/// istiod's `mergeTransportSocketListener`: deep-merged into a transport socket of the same name;
/// otherwise (`false`) the patch is merged as a whole.
fn merge_chain_transport_socket(
    socket: &mut Option<envoy_types::pb::envoy::config::core::v3::TransportSocket>,
    value: &FilterChain,
) -> bool {
    let Some(patch) = &value.transport_socket else {
        return false;
    };
    match socket.as_mut() {
        Some(ts) if ts.name == patch.name => {
            merge_socket_config(ts, patch);
            true
        }
        _ => false,
    }
}

fn merge_socket_config(
    ts: &mut envoy_types::pb::envoy::config::core::v3::TransportSocket,
    patch: &envoy_types::pb::envoy::config::core::v3::TransportSocket,
) {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    if let (Some(ConfigType::TypedConfig(dst)), Some(ConfigType::TypedConfig(src))) =
        (&ts.config_type, &patch.config_type)
        && let Ok(next) = merge_any(dst, src)
    {
        ts.config_type = Some(ConfigType::TypedConfig(next));
    }
}

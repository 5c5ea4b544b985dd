//! Build typed, then finish, then encode, as istiod builds then patches
//! (`pilot/pkg/networking/core`, `envoyfilter/*_patch.go`): every generator returns typed Envoy
//! protos with the class of proxy config they are ([`Typed`]); [`finish`] runs the cross-cutting
//! passes over them in a fixed order and only then encodes them.
//!
//! Where a cross-cutting feature goes: a [`Pass`] in [`PASSES`], in its place in the order
//! (TrafficExtension filters, EnvoyFilter patches, then access logs, tracing and stats). A pass sees every Cluster,
//! Listener (with its HTTP connection managers), RouteConfiguration, ClusterLoadAssignment and
//! Secret of a scope with its class; it reads the push context and the scope view, never the
//! proxy, so what it does is cached with the rest.

use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::proxy::{Generator, ProxyType};
use crate::xds::resource::{Finding, Resource};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use std::sync::Arc;

/// Which part of which kind of proxy a resource configures: what istiod's EnvoyFilter match
/// contexts (SIDECAR_INBOUND, SIDECAR_OUTBOUND, GATEWAY, waypoints) and Telemetry's modes select.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    SidecarInbound,
    SidecarOutbound,
    Gateway,
    Waypoint,
    /// A proxyless gRPC client (no filters of its own; passes that add Envoy filters leave it
    /// alone).
    Proxyless,
    /// A proxyless gRPC server's inbound listener.
    ProxylessServer,
}

impl Class {
    /// The class of what a scope's proxy sends toward services.
    pub fn outbound(scope: &ScopeView) -> Class {
        match (scope.generator, scope.proxy_type) {
            (Generator::Grpc, _) => Class::Proxyless,
            (_, ProxyType::Router) => Class::Gateway,
            (_, ProxyType::Waypoint) => Class::Waypoint,
            _ => Class::SidecarOutbound,
        }
    }

    /// The class of what a scope's proxy receives for its own workload.
    pub fn inbound(scope: &ScopeView) -> Class {
        match Class::outbound(scope) {
            Class::SidecarOutbound => Class::SidecarInbound,
            Class::Proxyless => Class::ProxylessServer,
            other => other,
        }
    }
}

/// One typed Envoy resource, as a generator built it.
#[derive(Debug, Clone, PartialEq)]
pub enum Built {
    Cluster(Box<Cluster>),
    Listener(Box<Listener>),
    Route(Box<RouteConfiguration>),
    LoadAssignment(Box<ClusterLoadAssignment>),
    Secret(Box<Secret>),
}

macro_rules! built_from {
    ($($ty:ty => $variant:ident),*) => {$(
        impl From<$ty> for Built {
            fn from(r: $ty) -> Built {
                Built::$variant(Box::new(r))
            }
        }
    )*};
}
built_from!(Cluster => Cluster, Listener => Listener, RouteConfiguration => Route,
    ClusterLoadAssignment => LoadAssignment, Secret => Secret);

/// A built resource with the name it is served under and its class.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    pub name: String,
    pub class: Class,
    pub built: Built,
    /// What the generator found while building it, reported by the stream layer.
    pub findings: Vec<Finding>,
}

impl Typed {
    pub fn new(name: impl Into<String>, class: Class, built: impl Into<Built>) -> Typed {
        Typed {
            name: name.into(),
            class,
            built: built.into(),
            findings: Vec::new(),
        }
    }

    /// The cluster, when this is one.
    pub fn cluster_mut(&mut self) -> Option<&mut Cluster> {
        match &mut self.built {
            Built::Cluster(c) => Some(c),
            _ => None,
        }
    }

    /// The load assignment, when this is one.
    pub fn load_assignment_mut(&mut self) -> Option<&mut ClusterLoadAssignment> {
        match &mut self.built {
            Built::LoadAssignment(c) => Some(c),
            _ => None,
        }
    }

    /// This resource, noting that its generator found `finding`.
    pub fn found(mut self, finding: Finding) -> Typed {
        if !self.findings.contains(&finding) {
            self.findings.push(finding);
        }
        self
    }

    /// Calls `edit` with every HTTP connection manager of a listener (by filter chain name),
    /// decoded; what `edit` changes is written back. Nothing is decoded for other resources.
    pub fn edit_http_connection_managers(
        &mut self,
        mut edit: impl FnMut(&str, &mut HttpConnectionManager),
    ) {
        let Built::Listener(listener) = &mut self.built else {
            return;
        };
        for_each_filter_config(listener, |chain, config| {
            edit_typed(config, |hcm| edit(chain, hcm))
        });
        // Proxyless gRPC listeners carry theirs as the API listener.
        if let Some(api) = listener
            .api_listener
            .as_mut()
            .and_then(|a| a.api_listener.as_mut())
        {
            edit_typed(api, |hcm| edit("", hcm));
        }
    }

    /// Calls `edit` with every TCP proxy of a listener's filter chains (by filter chain name),
    /// decoded; what `edit` changes is written back.
    pub fn edit_tcp_proxies(&mut self, mut edit: impl FnMut(&str, &mut TcpProxy)) {
        let Built::Listener(listener) = &mut self.built else {
            return;
        };
        for_each_filter_config(listener, |chain, config| {
            edit_typed(config, |tcp| edit(chain, tcp))
        });
    }

    fn encode(self) -> Arc<Resource> {
        let any = match &self.built {
            Built::Cluster(r) => any(r.as_ref()),
            Built::Listener(r) => any(r.as_ref()),
            Built::Route(r) => any(r.as_ref()),
            Built::LoadAssignment(r) => Any {
                type_url: <ClusterLoadAssignment as prost::Name>::type_url(),
                value: crate::xds::generate::encode::encode_load_assignment(r),
            },
            Built::Secret(r) => any(r.as_ref()),
        };
        Resource::with_findings(self.name, any, self.findings)
    }
}

/// Calls `visit` with the typed config of every filter of a listener's filter chains (the
/// default chain included), with the chain's name.
fn for_each_filter_config(listener: &mut Listener, mut visit: impl FnMut(&str, &mut Any)) {
    let chains = listener
        .filter_chains
        .iter_mut()
        .chain(listener.default_filter_chain.as_mut());
    for chain in chains {
        for f in &mut chain.filters {
            if let Some(filter::ConfigType::TypedConfig(config)) = f.config_type.as_mut() {
                visit(&chain.name, config);
            }
        }
    }
}

/// Calls `edit` with every HTTP connection manager of one filter chain, decoded; what `edit`
/// changes is written back. The one decode-and-encode of connection managers the passes share.
pub fn edit_chain_http_connection_managers(
    chain: &mut FilterChain,
    mut edit: impl FnMut(&mut HttpConnectionManager),
) {
    for f in &mut chain.filters {
        if let Some(filter::ConfigType::TypedConfig(config)) = f.config_type.as_mut() {
            edit_typed(config, &mut edit);
        }
    }
}

/// Calls `edit` with the HTTP connection manager `config` holds, decoded, and writes it back;
/// nothing when it holds another filter's config.
pub fn edit_http_connection_manager(
    config: &mut Any,
    edit: impl FnOnce(&mut HttpConnectionManager),
) {
    edit_typed(config, edit);
}

/// Decodes `config` if it holds an `M`, lets `edit` change it, and writes it back.
fn edit_typed<M: Message + Default + Name>(config: &mut Any, edit: impl FnOnce(&mut M)) {
    if config.type_url != M::type_url() {
        return;
    }
    if let Ok(mut message) = M::decode(config.value.as_slice()) {
        edit(&mut message);
        config.value = message.encode_to_vec();
    }
}

/// A cross-cutting step over a scope's typed resources.
pub trait Pass: Sync {
    /// Named in logs and `/debug` when it skips or rejects something.
    fn name(&self) -> &'static str;
    /// Whether it has anything to do for this scope: when no pass does, resources go straight
    /// to encoding.
    fn applies(&self, ctx: &PushContext, scope: &ScopeView) -> bool;
    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>);
}

/// Runs `passes` over `resources` in order, then encodes them.
pub fn finish_with(
    passes: &[&dyn Pass],
    ctx: &PushContext,
    scope: &ScopeView,
    mut resources: Vec<Typed>,
) -> Vec<Arc<Resource>> {
    for pass in passes {
        if pass.applies(ctx, scope) {
            pass.apply(ctx, scope, &mut resources);
        }
    }
    resources.into_iter().map(Typed::encode).collect()
}

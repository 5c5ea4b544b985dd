//! Build typed, then finish, then encode, as istiod builds then patches
//! (`pilot/pkg/networking/core`, `envoyfilter/*_patch.go`): every generator returns typed Envoy
//! protos with the class of proxy config they are ([`Typed`]); [`finish`] runs the cross-cutting
//! passes over them in a fixed order and only then encodes them.
//!
//! Where a cross-cutting feature goes: a [`Pass`] in [`PASSES`], in its place in the order
//! (TrafficExtension filters, Istio's stats, access logs, tracing, then EnvoyFilter patches on the
//! finished config). A pass sees every Cluster, Listener, RouteConfiguration,
//! ClusterLoadAssignment and Secret of a scope with its class; a listener's connection managers
//! and TCP proxies are typed ([`TypedListener`]) and it says what it is for ([`ListenerRole`]),
//! so a pass edits them without decoding and acts on roles, not names. A pass reads the push
//! context and the scope view, never the proxy, so what it does is cached with the rest.

use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::typed_listener::{ChainId, ListenerRole, NetworkFilter, TypedListener};
use crate::xds::proxy::{Generator, ProxyType};
use crate::xds::resource::{Finding, Resource};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
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
    /// ztunnel's addresses and authorizations (no Envoy config; no pass reads them).
    Ztunnel,
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
    Listener(Box<TypedListener>),
    Route(Box<RouteConfiguration>),
    LoadAssignment(Box<ClusterLoadAssignment>),
    Secret(Box<Secret>),
    /// An extension's config served over ECDS.
    ExtensionConfig(Box<TypedExtensionConfig>),
    /// A resource of Istio's own (ztunnel's, the DNS proxy's name table), which no pass edits.
    Istio(Arc<dyn IstioResource>),
}

/// A message of Istio's own protos served as a resource. Its module says its type (the finishing
/// step knows none of them), so it is encoded at the one encode site like every other.
pub trait IstioResource: std::fmt::Debug + Send + Sync {
    fn type_url(&self) -> TypeUrl;
    fn encoded(&self) -> Vec<u8>;
}

/// Equal when they encode to the same bytes of the same type.
impl PartialEq for dyn IstioResource {
    fn eq(&self, other: &Self) -> bool {
        self.type_url() == other.type_url() && self.encoded() == other.encoded()
    }
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
built_from!(Cluster => Cluster, TypedListener => Listener, RouteConfiguration => Route,
    ClusterLoadAssignment => LoadAssignment, Secret => Secret,
    TypedExtensionConfig => ExtensionConfig);

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

    /// The listener, when this is one.
    pub fn listener_mut(&mut self) -> Option<&mut TypedListener> {
        match &mut self.built {
            Built::Listener(l) => Some(l),
            _ => None,
        }
    }

    /// Calls `edit` with every HTTP connection manager of a listener and the chain it is in (an
    /// unnamed one for a proxyless client's API listener).
    pub fn edit_http_connection_managers(
        &mut self,
        mut edit: impl FnMut(ChainId, &mut HttpConnectionManager),
    ) {
        let Some(listener) = self.listener_mut() else {
            return;
        };
        for chain in listener.all_chains() {
            let (id, filters) = chain.filters_mut();
            for hcm in filters
                .iter_mut()
                .filter_map(NetworkFilter::http_connection_manager_mut)
            {
                edit(id, hcm);
            }
        }
        if let Some(api) = listener.api.as_mut() {
            edit(ChainId::default(), api);
        }
    }

    /// Calls `edit` with every TCP proxy of a listener's filter chains and the chain it is in.
    pub fn edit_tcp_proxies(&mut self, mut edit: impl FnMut(ChainId, &mut TcpProxy)) {
        let Some(listener) = self.listener_mut() else {
            return;
        };
        for chain in listener.all_chains() {
            let (id, filters) = chain.filters_mut();
            for tcp in filters.iter_mut().filter_map(NetworkFilter::tcp_proxy_mut) {
                edit(id, tcp);
            }
        }
    }

    /// What the listener is for, when this is one.
    pub fn listener_role(&self) -> Option<ListenerRole> {
        match &self.built {
            Built::Listener(l) => Some(l.role),
            _ => None,
        }
    }

    /// A resource of Istio's own, as `name`.
    pub fn istio(name: impl Into<String>, class: Class, r: impl IstioResource + 'static) -> Typed {
        Typed::new(name, class, Built::Istio(Arc::new(r)))
    }

    /// The one encode: what is sent.
    pub fn encode(self) -> Arc<Resource> {
        let any = match self.built {
            Built::Cluster(r) => any(r.as_ref()),
            Built::Listener(r) => any(&r.encode()),
            Built::Route(r) => any(r.as_ref()),
            Built::LoadAssignment(r) => Any {
                type_url: <ClusterLoadAssignment as prost::Name>::type_url(),
                value: crate::xds::generate::encode::encode_load_assignment(&r),
            },
            Built::Secret(r) => any(r.as_ref()),
            Built::ExtensionConfig(r) => any(r.as_ref()),
            Built::Istio(r) => Any {
                type_url: r.type_url().url().to_string(),
                value: r.encoded(),
            },
        };
        Resource::with_findings(self.name, any, self.findings)
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

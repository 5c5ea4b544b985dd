//! What each type's generators read, per proxy role: the config kinds whose change can alter a
//! resource of that type. A push keeps the previous push's resources of every type and role none
//! of whose kinds changed (`PushContext::keeping`), as istiod's xDS cache keeps clusters and
//! endpoints across a VirtualService change. The mesh settings and the scope (its key) are part
//! of every type's inputs. A kind read but not listed here would leave stale resources: the
//! `cache_keys` tests remove each kind from a varied mesh and check that every type not
//! declaring it is built the same.

use crate::config::Kind;
use crate::xds::context::Role;
use crate::xds::types::TypeUrl;

/// The services and endpoints (the registry), and the ambient facts on pods and namespaces.
const REGISTRY: &[Kind] = &[
    Kind::ServiceEntry,
    Kind::WorkloadEntry,
    Kind::WorkloadGroup,
    Kind::Service,
    Kind::EndpointSlice,
    Kind::Pod,
    Kind::Namespace,
    Kind::Node,
];

/// What a scope's view is derived from besides the registry: the Sidecar that applies, the
/// ProxyConfigs and the mesh config (ConfigMaps).
const SCOPE: &[Kind] = &[Kind::Sidecar, Kind::ProxyConfig, Kind::ConfigMap];

/// DestinationRules, the Gateway API's BackendTLSPolicies among them (translated into rules).
const DESTINATION_RULES: &[Kind] = &[Kind::DestinationRule, Kind::BackendTLSPolicy];

/// Gateway API Gateways: waypoints, east-west gateways and their classes.
const GATEWAYS: &[Kind] = &[
    Kind::GatewayClass,
    Kind::KubernetesGateway,
    Kind::ListenerSet,
];

/// Routes of every API, and Istio's Gateways they bind to.
const ROUTES: &[Kind] = &[
    Kind::VirtualService,
    Kind::Gateway,
    Kind::HTTPRoute,
    Kind::GRPCRoute,
    Kind::TCPRoute,
    Kind::TLSRoute,
    Kind::ReferenceGrant,
    Kind::Ingress,
    Kind::IngressClass,
];

/// Every kind: the type is kept only by a push that changed nothing in the store.
const EVERYTHING: &[&[Kind]] = &[Kind::ALL];

/// Endpoints: the services' endpoints filtered and weighted by their DestinationRules, whether
/// mTLS is off anywhere (PeerAuthentication), tunnels through waypoints and network gateways.
const ENDPOINTS: &[&[Kind]] = &[
    REGISTRY,
    SCOPE,
    DESTINATION_RULES,
    GATEWAYS,
    &[Kind::PeerAuthentication],
];

/// Clusters of sidecars, gateways and proxyless clients: the services in scope, their
/// DestinationRules, inbound mTLS (PeerAuthentication), JWKS servers (RequestAuthentication),
/// a gateway's AUTO_PASSTHROUGH servers (Istio Gateways), HBONE to waypoints, EnvoyFilter
/// patches.
const CLUSTERS: &[&[Kind]] = &[
    REGISTRY,
    SCOPE,
    DESTINATION_RULES,
    GATEWAYS,
    &[
        Kind::PeerAuthentication,
        Kind::RequestAuthentication,
        Kind::Gateway,
        Kind::EnvoyFilter,
    ],
];

/// A waypoint's clusters also serve its routes' destinations.
const WAYPOINT_CLUSTERS: &[&[Kind]] = &[
    REGISTRY,
    SCOPE,
    DESTINATION_RULES,
    GATEWAYS,
    ROUTES,
    &[
        Kind::PeerAuthentication,
        Kind::RequestAuthentication,
        Kind::EnvoyFilter,
    ],
];

/// Route configurations: everything but the security policies, which apply to listeners.
const ROUTE_CONFIGS: &[&[Kind]] = &[
    REGISTRY,
    SCOPE,
    DESTINATION_RULES,
    GATEWAYS,
    ROUTES,
    &[
        Kind::EnvoyFilter,
        Kind::Telemetry,
        Kind::WasmPlugin,
        Kind::TrafficExtension,
        Kind::Secret,
    ],
];

/// istio-agent's DNS table: the hostnames and addresses of the services in scope.
const NAME_TABLE: &[&[Kind]] = &[REGISTRY, SCOPE, GATEWAYS];

/// The kinds `type_url`'s generators read for a proxy of `role`, in groups.
pub fn reads(type_url: TypeUrl, role: Role) -> &'static [&'static [Kind]] {
    match (type_url, role) {
        (TypeUrl::Endpoint, _) => ENDPOINTS,
        (TypeUrl::Cluster, Role::Waypoint) => WAYPOINT_CLUSTERS,
        (TypeUrl::Cluster, _) => CLUSTERS,
        (TypeUrl::Route, _) => ROUTE_CONFIGS,
        (TypeUrl::NameTable, _) => NAME_TABLE,
        // Listeners carry every policy; extension configs, ztunnel's addresses and
        // authorizations are built from indexes of the whole store; secrets are not cached.
        (TypeUrl::Listener, _)
        | (TypeUrl::ExtensionConfig, _)
        | (TypeUrl::Address, _)
        | (TypeUrl::Authorization, _)
        | (TypeUrl::Secret, _) => EVERYTHING,
    }
}

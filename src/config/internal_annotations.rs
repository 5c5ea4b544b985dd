//! istiod's internal annotations (`pkg/config/constants`): what it writes on the objects it derives
//! from the Gateway API and Ingresses, and, of those, what validation refuses from users.

/// The objects a derived object comes from (`Kind/name[/section].namespace`); users may not set it.
pub const PARENTS: &str = "internal.istio.io/parents";
/// The namespace of a derived object's parent where it differs; users may not set it.
pub const PARENT_NAMESPACE: &str = "internal.istio.io/parent-namespace";
/// Which semantics a VirtualService's routes take: `gateway` or `ingress`.
pub const ROUTE_SEMANTICS: &str = "internal.istio.io/route-semantics";
/// On a Gateway: the hostnames of the Services whose pods serve it.
pub const GATEWAY_SERVICE: &str = "internal.istio.io/gateway-service";

//! The xDS resource types Rudder serves, as one `Copy` enum: the type URL, short name, wildcard rule
//! and push order live here once, instead of as strings compared across modules.

use std::fmt;

/// Envoy's and ztunnel's resource types. The declaration order is the push order: Envoy's
/// make-before-break (clusters, endpoints, listeners, routes, the secrets they name), then ztunnel's
/// types (policies before the workloads that reference them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TypeUrl {
    Cluster,
    Endpoint,
    Listener,
    Route,
    /// ECDS: filter configs an HTTP connection manager asks for by name (Wasm extensions).
    ExtensionConfig,
    Secret,
    /// NDS: the DNS name table istio-agent's DNS proxy answers from.
    NameTable,
    Authorization,
    Address,
}

impl TypeUrl {
    /// Every type, in push order.
    pub const ALL: [TypeUrl; 9] = [
        TypeUrl::Cluster,
        TypeUrl::Endpoint,
        TypeUrl::Listener,
        TypeUrl::Route,
        TypeUrl::ExtensionConfig,
        TypeUrl::Secret,
        TypeUrl::NameTable,
        TypeUrl::Authorization,
        TypeUrl::Address,
    ];

    /// The type URL on the wire.
    pub const fn url(self) -> &'static str {
        match self {
            TypeUrl::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            TypeUrl::Endpoint => {
                "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
            }
            TypeUrl::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            TypeUrl::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            TypeUrl::ExtensionConfig => {
                "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
            }
            TypeUrl::Secret => {
                "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
            }
            TypeUrl::NameTable => "type.googleapis.com/istio.networking.nds.v1.NameTable",
            TypeUrl::Address => "type.googleapis.com/istio.workload.Address",
            TypeUrl::Authorization => "type.googleapis.com/istio.security.Authorization",
        }
    }

    /// The type a client names on the wire; `None` for a type Rudder does not serve.
    /// The type of a short name (`cds`, `eds`, `lds`, `rds`, `sds`...), as istiod's debug
    /// endpoints take them.
    pub fn from_short(short: &str) -> Option<TypeUrl> {
        TypeUrl::ALL.into_iter().find(|t| t.short() == short)
    }

    pub fn parse(url: &str) -> Option<TypeUrl> {
        TypeUrl::ALL.into_iter().find(|t| t.url() == url)
    }

    /// istiod's short name, used in metric labels and logs (`cds`, `eds`, …).
    pub const fn short(self) -> &'static str {
        match self {
            TypeUrl::Cluster => "cds",
            TypeUrl::Endpoint => "eds",
            TypeUrl::Listener => "lds",
            TypeUrl::Route => "rds",
            TypeUrl::ExtensionConfig => "ecds",
            TypeUrl::Secret => "sds",
            TypeUrl::NameTable => "nds",
            TypeUrl::Address => "wds",
            TypeUrl::Authorization => "wads",
        }
    }

    /// Types a client may leave unnamed to mean "everything" (the others are always named).
    pub const fn is_wildcard(self) -> bool {
        matches!(
            self,
            TypeUrl::Cluster
                | TypeUrl::Listener
                | TypeUrl::NameTable
                | TypeUrl::Address
                | TypeUrl::Authorization
        )
    }

    /// Types whose resources depend only on the push context, the proxy's scope view and the names
    /// asked for, so one list serves every stream of a scope; SDS and ztunnel's types depend on more.
    pub const fn is_scoped(self) -> bool {
        matches!(
            self,
            TypeUrl::Cluster
                | TypeUrl::Endpoint
                | TypeUrl::Listener
                | TypeUrl::Route
                | TypeUrl::ExtensionConfig
                | TypeUrl::NameTable
        )
    }
}

impl fmt::Display for TypeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}

impl serde::Serialize for TypeUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.url())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_and_push_order_is_declaration_order() {
        for t in TypeUrl::ALL {
            assert_eq!(TypeUrl::parse(t.url()), Some(t));
        }
        assert_eq!(TypeUrl::parse("type.googleapis.com/unknown"), None);
        let mut sorted = TypeUrl::ALL;
        sorted.sort();
        assert_eq!(sorted, TypeUrl::ALL);
    }
}

//! The kinds of config Rudder reads: each one's name, group, served versions, plural and scope.

use super::gateway_api;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a kind comes from, which decides how it is read: Istio's config and the Gateway API's
/// are config (files, watchers, validation, `/debug`); Kubernetes kinds are written by the
/// Kubernetes source only, and never come from config documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Istio,
    GatewayApi,
    Kubernetes,
}

/// Objects of a namespace, or of the cluster (stored with an empty namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// One row of the kind table: everything about a kind that is a fact of its API.
#[derive(Debug)]
pub struct KindInfo {
    /// The Kubernetes kind name (`Gateway` for both Istio's and the Gateway API's).
    pub name: &'static str,
    pub group: &'static str,
    /// The API versions served (the CRD's `versions` with `served: true`), best first.
    pub versions: &'static [&'static str],
    /// The lower-case plural, as in the CRD name `virtualservices.networking.istio.io`.
    pub plural: &'static str,
    pub scope: Scope,
    pub family: Family,
    /// `kubectl`'s short names (the CRD's `shortNames`).
    pub short_names: &'static [&'static str],
}

const NETWORKING: &str = "networking.istio.io";
const SECURITY: &str = "security.istio.io";
const TELEMETRY: &str = "telemetry.istio.io";
const EXTENSIONS: &str = "extensions.istio.io";
const GATEWAY_API: &str = gateway_api::GROUP;
const NETWORKING_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3"];

/// The kind table: each kind once, with its row. The enum, `Kind::ALL` and `Kind::info` come
/// from it, so a new kind is one line here (and its spec type), with no `_ =>` to hide in.
macro_rules! kinds {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $family:ident {
            $name:literal, $group:expr, $versions:expr, $plural:literal, $scope:ident,
            $short:expr
        }
    ),+ $(,)?) => {
        /// Every kind of object Rudder reads.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
        pub enum Kind {
            $($(#[$doc])* $variant),+
        }

        impl Kind {
            /// Every kind, in the table's order (which is also the kinds' order).
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),+];

            /// The kind's row of the table.
            pub const fn info(self) -> &'static KindInfo {
                match self {
                    $(Kind::$variant => &KindInfo {
                        name: $name,
                        group: $group,
                        versions: $versions,
                        plural: $plural,
                        scope: Scope::$scope,
                        family: Family::$family,
                        short_names: $short,
                    }),+
                }
            }
        }
    };
}

kinds! {
    VirtualService = Istio { "VirtualService", NETWORKING, NETWORKING_VERSIONS, "virtualservices", Namespaced, &["vs"] },
    DestinationRule = Istio { "DestinationRule", NETWORKING, NETWORKING_VERSIONS, "destinationrules", Namespaced, &["dr"] },
    Gateway = Istio { "Gateway", NETWORKING, NETWORKING_VERSIONS, "gateways", Namespaced, &["gw"] },
    ServiceEntry = Istio { "ServiceEntry", NETWORKING, NETWORKING_VERSIONS, "serviceentries", Namespaced, &["se"] },
    Sidecar = Istio { "Sidecar", NETWORKING, NETWORKING_VERSIONS, "sidecars", Namespaced, &[] },
    WorkloadEntry = Istio { "WorkloadEntry", NETWORKING, NETWORKING_VERSIONS, "workloadentries", Namespaced, &["we"] },
    WorkloadGroup = Istio { "WorkloadGroup", NETWORKING, NETWORKING_VERSIONS, "workloadgroups", Namespaced, &["wg"] },
    EnvoyFilter = Istio { "EnvoyFilter", NETWORKING, &["v1alpha3"], "envoyfilters", Namespaced, &[] },
    PeerAuthentication = Istio { "PeerAuthentication", SECURITY, &["v1", "v1beta1"], "peerauthentications", Namespaced, &["pa"] },
    AuthorizationPolicy = Istio { "AuthorizationPolicy", SECURITY, &["v1", "v1beta1"], "authorizationpolicies", Namespaced, &["ap"] },
    RequestAuthentication = Istio { "RequestAuthentication", SECURITY, &["v1", "v1beta1"], "requestauthentications", Namespaced, &["ra"] },
    Telemetry = Istio { "Telemetry", TELEMETRY, &["v1", "v1alpha1"], "telemetries", Namespaced, &[] },
    WasmPlugin = Istio { "WasmPlugin", EXTENSIONS, &["v1alpha1"], "wasmplugins", Namespaced, &[] },
    TrafficExtension = Istio { "TrafficExtension", EXTENSIONS, &["v1alpha1"], "trafficextensions", Namespaced, &[] },
    ProxyConfig = Istio { "ProxyConfig", NETWORKING, &["v1beta1"], "proxyconfigs", Namespaced, &[] },
    // The Kubernetes Gateway API, read as config like Istio's kinds (v1.5's CRDs, experimental
    // channel, a superset of standard).
    GatewayClass = GatewayApi { "GatewayClass", GATEWAY_API, &["v1", "v1beta1"], "gatewayclasses", Cluster, &[] },
    /// The Gateway API's `Gateway` (istiod's `KubernetesGateway`), not Istio's.
    KubernetesGateway = GatewayApi { "Gateway", GATEWAY_API, &["v1", "v1beta1"], "gateways", Namespaced, &[] },
    HTTPRoute = GatewayApi { "HTTPRoute", GATEWAY_API, &["v1", "v1beta1"], "httproutes", Namespaced, &[] },
    GRPCRoute = GatewayApi { "GRPCRoute", GATEWAY_API, &["v1"], "grpcroutes", Namespaced, &[] },
    TCPRoute = GatewayApi { "TCPRoute", GATEWAY_API, &["v1alpha2"], "tcproutes", Namespaced, &[] },
    TLSRoute = GatewayApi { "TLSRoute", GATEWAY_API, &["v1", "v1alpha3", "v1alpha2"], "tlsroutes", Namespaced, &[] },
    ReferenceGrant = GatewayApi { "ReferenceGrant", GATEWAY_API, &["v1", "v1beta1"], "referencegrants", Namespaced, &[] },
    /// TLS from gateways and sidecars to a Service's backends.
    BackendTLSPolicy = GatewayApi { "BackendTLSPolicy", GATEWAY_API, &["v1", "v1alpha3"], "backendtlspolicies", Namespaced, &[] },
    /// More listeners for a Gateway that allows them.
    ListenerSet = GatewayApi { "ListenerSet", GATEWAY_API, &["v1"], "listenersets", Namespaced, &[] },
    // Kubernetes kinds, written by the Kubernetes source; never read from config files.
    Service = Kubernetes { "Service", "", &["v1"], "services", Namespaced, &[] },
    EndpointSlice = Kubernetes { "EndpointSlice", "discovery.k8s.io", &["v1"], "endpointslices", Namespaced, &[] },
    Pod = Kubernetes { "Pod", "", &["v1"], "pods", Namespaced, &[] },
    Namespace = Kubernetes { "Namespace", "", &["v1"], "namespaces", Cluster, &[] },
    Node = Kubernetes { "Node", "", &["v1"], "nodes", Cluster, &[] },
    ConfigMap = Kubernetes { "ConfigMap", "", &["v1"], "configmaps", Namespaced, &[] },
    /// TLS material for gateways (`credentialName`), served over SDS; never shown in debug output.
    Secret = Kubernetes { "Secret", "", &["v1"], "secrets", Namespaced, &[] },
    /// Kubernetes Ingress, served by the ingress gateway as istiod does.
    Ingress = Kubernetes { "Ingress", "networking.k8s.io", &["v1"], "ingresses", Namespaced, &[] },
    IngressClass = Kubernetes { "IngressClass", "networking.k8s.io", &["v1"], "ingressclasses", Cluster, &[] },
}

/// How many kinds of `family` the table has.
const fn count(family: Family) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < Kind::ALL.len() {
        if Kind::ALL[i].info().family as u8 == family as u8 {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The kinds of `family`, in the table's order.
const fn of_family<const N: usize>(family: Family) -> [Kind; N] {
    let mut out = [Kind::VirtualService; N];
    let (mut i, mut n) = (0, 0);
    while i < Kind::ALL.len() {
        if Kind::ALL[i].info().family as u8 == family as u8 {
            out[n] = Kind::ALL[i];
            n += 1;
        }
        i += 1;
    }
    out
}

impl Kind {
    /// Istio's config kinds, in the order they are listed and validated.
    pub const ISTIO: [Kind; count(Family::Istio)] = of_family(Family::Istio);

    /// The Gateway API kinds istiod serves, watched when their CRDs are installed.
    pub const GATEWAY_API: [Kind; count(Family::GatewayApi)] = of_family(Family::GatewayApi);

    /// The Kubernetes kinds the service registry (and the ingress gateway) is built from.
    pub const KUBERNETES: [Kind; count(Family::Kubernetes)] = of_family(Family::Kubernetes);

    /// Every kind read as config (Istio's and the Gateway API's): what a config directory, the
    /// Kubernetes watchers and `/debug` list.
    pub fn config_kinds() -> impl Iterator<Item = Kind> {
        Kind::ISTIO.into_iter().chain(Kind::GATEWAY_API)
    }

    /// Objects without a namespace (stored with an empty one).
    pub fn cluster_scoped(self) -> bool {
        self.info().scope == Scope::Cluster
    }

    pub fn is_gateway_api(self) -> bool {
        self.info().family == Family::GatewayApi
    }

    /// Istio's kinds and the Gateway API's: config, not Kubernetes objects.
    pub fn is_istio(self) -> bool {
        self.info().family != Family::Kubernetes
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// An Istio kind by name (Kubernetes kinds never come from config documents).
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ISTIO.into_iter().find(|k| k.name() == name)
    }

    /// The name debug output uses: the kind's name, but `Gateway.gateway.networking.k8s.io` for
    /// the Gateway API's `Gateway`, which would otherwise read as Istio's.
    pub fn qualified_name(self) -> String {
        if self == Kind::KubernetesGateway {
            format!("{}.{}", self.name(), self.group())
        } else {
            self.name().to_string()
        }
    }

    /// A config kind by its `qualified_name`.
    pub fn from_qualified_name(name: &str) -> Option<Kind> {
        Kind::config_kinds().find(|k| k.qualified_name() == name)
    }

    /// A config kind (Istio's or the Gateway API's) by API group and kind name.
    pub fn from_group_kind(group: &str, name: &str) -> Option<Kind> {
        Kind::config_kinds().find(|k| k.name() == name && k.group() == group)
    }

    pub fn group(self) -> &'static str {
        self.info().group
    }

    /// The API versions served for this kind (CRD `versions` with `served: true`).
    pub fn served_versions(self) -> &'static [&'static str] {
        self.info().versions
    }

    /// Lower-case plural, as in the CRD name `virtualservices.networking.istio.io`.
    pub fn plural(self) -> String {
        self.info().plural.to_string()
    }
}

/// A kind is written as its Kubernetes name (`Gateway` for both Istio's and the Gateway API's:
/// the object's `apiVersion` tells them apart, as in Kubernetes).
impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::{Family, Kind};

    /// The table lists each kind once, in the enum's order (what `Ord` sorts by), and its
    /// families split it without a kind left over.
    #[test]
    fn the_table_is_the_kinds() {
        for (i, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?} out of place");
        }
        let families = Kind::ISTIO.len() + Kind::GATEWAY_API.len() + Kind::KUBERNETES.len();
        assert_eq!(families, Kind::ALL.len());
        assert!(Kind::ISTIO.iter().all(|k| k.info().family == Family::Istio));
        assert!(Kind::KUBERNETES.iter().all(|k| !k.is_istio()));
        assert_eq!(Kind::ISTIO.len(), 15);
    }

    /// The names of Istio's own CRDs: Rudder's must be the same objects for a drop-in install.
    #[test]
    fn plurals_are_istios_crd_names() {
        let names: Vec<String> = Kind::ISTIO
            .iter()
            .map(|k| format!("{}.{}", k.plural(), k.group()))
            .collect();
        assert_eq!(
            names,
            [
                "virtualservices.networking.istio.io",
                "destinationrules.networking.istio.io",
                "gateways.networking.istio.io",
                "serviceentries.networking.istio.io",
                "sidecars.networking.istio.io",
                "workloadentries.networking.istio.io",
                "workloadgroups.networking.istio.io",
                "envoyfilters.networking.istio.io",
                "peerauthentications.security.istio.io",
                "authorizationpolicies.security.istio.io",
                "requestauthentications.security.istio.io",
                "telemetries.telemetry.istio.io",
                "wasmplugins.extensions.istio.io",
                "trafficextensions.extensions.istio.io",
                "proxyconfigs.networking.istio.io",
            ]
        );
    }
}

//! The kinds of config Rudder reads: each one's name, group, served versions, plural and scope.

use super::gateway_api;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Every Istio config kind Rudder understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub enum Kind {
    VirtualService,
    DestinationRule,
    Gateway,
    ServiceEntry,
    Sidecar,
    WorkloadEntry,
    WorkloadGroup,
    EnvoyFilter,
    PeerAuthentication,
    AuthorizationPolicy,
    RequestAuthentication,
    Telemetry,
    WasmPlugin,
    TrafficExtension,
    ProxyConfig,
    // The Kubernetes Gateway API (gateway.networking.k8s.io), read as config like Istio's kinds.
    GatewayClass,
    /// The Gateway API's `Gateway` (istiod's `KubernetesGateway`), not Istio's.
    KubernetesGateway,
    HTTPRoute,
    GRPCRoute,
    TCPRoute,
    TLSRoute,
    ReferenceGrant,
    /// TLS from gateways and sidecars to a Service's backends (the Gateway API's).
    BackendTLSPolicy,
    /// More listeners for a Gateway that allows them (the Gateway API's).
    ListenerSet,
    // Kubernetes kinds, written by the Kubernetes source; never read from config files.
    Service,
    EndpointSlice,
    Pod,
    Namespace,
    Node,
    ConfigMap,
    /// TLS material for gateways (`credentialName`), served over SDS; never shown in debug output.
    Secret,
    /// Kubernetes Ingress (networking.k8s.io), served by the ingress gateway as istiod does.
    Ingress,
    IngressClass,
}

impl Kind {
    /// Istio's config kinds, in the order they are listed and validated.
    pub const ISTIO: [Kind; 15] = [
        Kind::VirtualService,
        Kind::DestinationRule,
        Kind::Gateway,
        Kind::ServiceEntry,
        Kind::Sidecar,
        Kind::WorkloadEntry,
        Kind::WorkloadGroup,
        Kind::EnvoyFilter,
        Kind::PeerAuthentication,
        Kind::AuthorizationPolicy,
        Kind::RequestAuthentication,
        Kind::Telemetry,
        Kind::WasmPlugin,
        Kind::TrafficExtension,
        Kind::ProxyConfig,
    ];

    /// The Gateway API kinds istiod serves, watched when their CRDs are installed.
    pub const GATEWAY_API: [Kind; 9] = [
        Kind::GatewayClass,
        Kind::KubernetesGateway,
        Kind::HTTPRoute,
        Kind::GRPCRoute,
        Kind::TCPRoute,
        Kind::TLSRoute,
        Kind::ReferenceGrant,
        Kind::BackendTLSPolicy,
        Kind::ListenerSet,
    ];

    /// Every kind read as config (Istio's and the Gateway API's): what a config directory, the
    /// Kubernetes watchers and `/debug` list.
    pub fn config_kinds() -> impl Iterator<Item = Kind> {
        Kind::ISTIO.into_iter().chain(Kind::GATEWAY_API)
    }

    /// Objects without a namespace (stored with an empty one).
    pub fn cluster_scoped(self) -> bool {
        matches!(
            self,
            Kind::GatewayClass | Kind::Namespace | Kind::Node | Kind::IngressClass
        )
    }

    pub fn is_gateway_api(self) -> bool {
        Kind::GATEWAY_API.contains(&self)
    }

    /// The Kubernetes kinds the service registry (and the ingress gateway) is built from.
    pub const KUBERNETES: [Kind; 9] = [
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Pod,
        Kind::Namespace,
        Kind::Node,
        Kind::ConfigMap,
        Kind::Secret,
        Kind::Ingress,
        Kind::IngressClass,
    ];

    pub fn is_istio(self) -> bool {
        !Kind::KUBERNETES.contains(&self)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::VirtualService => "VirtualService",
            Kind::DestinationRule => "DestinationRule",
            Kind::Gateway => "Gateway",
            Kind::ServiceEntry => "ServiceEntry",
            Kind::Sidecar => "Sidecar",
            Kind::WorkloadEntry => "WorkloadEntry",
            Kind::WorkloadGroup => "WorkloadGroup",
            Kind::EnvoyFilter => "EnvoyFilter",
            Kind::PeerAuthentication => "PeerAuthentication",
            Kind::AuthorizationPolicy => "AuthorizationPolicy",
            Kind::RequestAuthentication => "RequestAuthentication",
            Kind::Telemetry => "Telemetry",
            Kind::WasmPlugin => "WasmPlugin",
            Kind::TrafficExtension => "TrafficExtension",
            Kind::ProxyConfig => "ProxyConfig",
            Kind::GatewayClass => "GatewayClass",
            Kind::KubernetesGateway => "Gateway",
            Kind::HTTPRoute => "HTTPRoute",
            Kind::GRPCRoute => "GRPCRoute",
            Kind::TCPRoute => "TCPRoute",
            Kind::TLSRoute => "TLSRoute",
            Kind::ReferenceGrant => "ReferenceGrant",
            Kind::BackendTLSPolicy => "BackendTLSPolicy",
            Kind::ListenerSet => "ListenerSet",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Pod => "Pod",
            Kind::Namespace => "Namespace",
            Kind::Node => "Node",
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
            Kind::Ingress => "Ingress",
            Kind::IngressClass => "IngressClass",
        }
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
        match self {
            Kind::PeerAuthentication | Kind::AuthorizationPolicy | Kind::RequestAuthentication => {
                "security.istio.io"
            }
            Kind::Telemetry => "telemetry.istio.io",
            Kind::WasmPlugin | Kind::TrafficExtension => "extensions.istio.io",
            Kind::EndpointSlice => "discovery.k8s.io",
            Kind::Ingress | Kind::IngressClass => "networking.k8s.io",
            Kind::GatewayClass
            | Kind::KubernetesGateway
            | Kind::HTTPRoute
            | Kind::GRPCRoute
            | Kind::TCPRoute
            | Kind::TLSRoute
            | Kind::ReferenceGrant
            | Kind::BackendTLSPolicy
            | Kind::ListenerSet => gateway_api::GROUP,
            Kind::Service
            | Kind::Pod
            | Kind::Namespace
            | Kind::Node
            | Kind::ConfigMap
            | Kind::Secret => "",
            _ => "networking.istio.io",
        }
    }

    /// The API versions Istio serves for this kind (CRD `versions` with `served: true`).
    pub fn served_versions(self) -> &'static [&'static str] {
        match self {
            Kind::EnvoyFilter => &["v1alpha3"],
            Kind::PeerAuthentication | Kind::AuthorizationPolicy | Kind::RequestAuthentication => {
                &["v1", "v1beta1"]
            }
            Kind::Telemetry => &["v1", "v1alpha1"],
            Kind::WasmPlugin | Kind::TrafficExtension => &["v1alpha1"],
            Kind::ProxyConfig => &["v1beta1"],
            // Gateway API v1.5's CRDs (experimental channel, a superset of standard).
            Kind::GatewayClass | Kind::KubernetesGateway | Kind::HTTPRoute => &["v1", "v1beta1"],
            Kind::GRPCRoute => &["v1"],
            Kind::TCPRoute => &["v1alpha2"],
            Kind::TLSRoute => &["v1", "v1alpha3", "v1alpha2"],
            Kind::ReferenceGrant => &["v1", "v1beta1"],
            Kind::BackendTLSPolicy => &["v1", "v1alpha3"],
            k if !k.is_istio() => &["v1"],
            _ => &["v1", "v1beta1", "v1alpha3"],
        }
    }

    /// Lower-case plural, as in the CRD name `virtualservices.networking.istio.io`.
    pub fn plural(self) -> String {
        match self {
            Kind::GatewayClass => return "gatewayclasses".into(),
            Kind::Ingress => return "ingresses".into(),
            Kind::IngressClass => return "ingressclasses".into(),
            _ => {}
        }
        let lower = self.name().to_ascii_lowercase();
        // A consonant before the final `y`: policy → policies, serviceentry → serviceentries,
        // telemetry → telemetries (but gateway → gateways).
        match lower.strip_suffix('y') {
            Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{stem}ies"),
            _ => format!("{lower}s"),
        }
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
    use super::Kind;

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

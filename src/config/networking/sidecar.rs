//! Sidecar: ingress and egress listeners, outbound traffic policy.

use super::destination_rule::ConnectionPoolSettings;
use super::gateway::{Port, ServerTlsSettings};
use super::virtual_service::Destination;
use crate::config::common::LabelSelector;
use serde::{Deserialize, Serialize};

istio_enum!(CaptureMode {
    DEFAULT,
    IPTABLES,
    NONE
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sidecar {
    pub workload_selector: Option<LabelSelector>,
    #[serde(default)]
    pub ingress: Vec<IstioIngressListener>,
    #[serde(default)]
    pub egress: Vec<IstioEgressListener>,
    pub inbound_connection_pool: Option<ConnectionPoolSettings>,
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IstioIngressListener {
    pub port: Option<Port>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub capture_mode: CaptureMode,
    #[serde(default)]
    pub default_endpoint: String,
    pub tls: Option<ServerTlsSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IstioEgressListener {
    pub port: Option<Port>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub capture_mode: CaptureMode,
    #[serde(default)]
    pub hosts: Vec<String>,
}

istio_enum!(OutboundTrafficPolicyMode {
    REGISTRY_ONLY,
    ALLOW_ANY
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutboundTrafficPolicy {
    #[serde(default)]
    pub mode: OutboundTrafficPolicyMode,
    pub egress_proxy: Option<Destination>,
}

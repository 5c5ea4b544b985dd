//! ServiceEntry, WorkloadEntry and WorkloadGroup.

use super::gateway::Port;
use crate::config::common::LabelSelector;
use crate::config::common::Labels;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

istio_enum!(Location {
    MESH_EXTERNAL,
    MESH_INTERNAL
});

istio_enum!(Resolution {
    NONE,
    STATIC,
    DNS,
    DNS_ROUND_ROBIN,
    DYNAMIC_DNS
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceEntry {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub ports: Vec<Port>,
    #[serde(default)]
    pub location: Location,
    #[serde(default)]
    pub resolution: Resolution,
    #[serde(default)]
    pub endpoints: Vec<WorkloadEntry>,
    pub workload_selector: Option<LabelSelector>,
    #[serde(default)]
    pub export_to: Vec<String>,
    #[serde(default)]
    pub subject_alt_names: Vec<String>,
}

/// The label that opts a ServiceEntry out of IP auto-allocation (`"false"`).
pub const ENABLE_AUTOALLOCATE_IP: &str = "networking.istio.io/enable-autoallocate-ip";

impl ServiceEntry {
    /// Whether its hosts get auto-allocated addresses (istiod's `ShouldV2AutoAllocateIP`, the
    /// feature on): no addresses of its own, a resolution the dataplane can honour an address
    /// for, and no opt-out label.
    pub fn auto_allocates(&self, labels: &BTreeMap<String, String>) -> bool {
        self.resolution != Resolution::NONE
            && self.addresses.is_empty()
            && !labels
                .get(ENABLE_AUTOALLOCATE_IP)
                .is_some_and(|v| v.eq_ignore_ascii_case("false"))
    }

    /// The hosts that get an address: wildcards only with DYNAMIC_DNS (istiod's `keepHost`).
    pub fn allocated_hosts(&self) -> impl Iterator<Item = &String> {
        self.hosts
            .iter()
            .filter(|h| !h.starts_with('*') || self.resolution == Resolution::DYNAMIC_DNS)
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadEntry {
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub ports: BTreeMap<String, u32>,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub network: String,
    #[serde(default)]
    pub locality: String,
    #[serde(default)]
    pub weight: u32,
    #[serde(default)]
    pub service_account: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadGroup {
    pub metadata: Option<WorkloadGroupObjectMeta>,
    pub template: Option<WorkloadEntry>,
    pub probe: Option<ReadinessProbe>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadGroupObjectMeta {
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub annotations: Labels,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadinessProbe {
    #[serde(default)]
    pub initial_delay_seconds: i32,
    #[serde(default)]
    pub timeout_seconds: i32,
    #[serde(default)]
    pub period_seconds: i32,
    #[serde(default)]
    pub success_threshold: i32,
    #[serde(default)]
    pub failure_threshold: i32,
    pub http_get: Option<HttpHealthCheckConfig>,
    pub tcp_socket: Option<TcpHealthCheckConfig>,
    pub exec: Option<ExecHealthCheckConfig>,
    pub grpc: Option<GrpcHealthCheckConfig>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHealthCheckConfig {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub scheme: String,
    #[serde(default)]
    pub http_headers: Vec<HttpHeader>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpHealthCheckConfig {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub port: u32,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecHealthCheckConfig {
    #[serde(default)]
    pub command: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcHealthCheckConfig {
    #[serde(default)]
    pub port: u32,
    pub service: Option<String>,
}

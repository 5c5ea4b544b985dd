//! EnvoyFilter: what a patch matches and applies.

use crate::config::common::Labels;
use crate::config::common::{LabelSelector, PolicyTargetReference};
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyFilter {
    pub workload_selector: Option<LabelSelector>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub config_patches: Vec<EnvoyConfigObjectPatch>,
    #[serde(default)]
    pub priority: i32,
}

istio_enum!(ApplyTo {
    INVALID,
    LISTENER,
    FILTER_CHAIN,
    NETWORK_FILTER,
    HTTP_FILTER,
    ROUTE_CONFIGURATION,
    VIRTUAL_HOST,
    HTTP_ROUTE,
    CLUSTER,
    EXTENSION_CONFIG,
    BOOTSTRAP,
    LISTENER_FILTER
});

istio_enum!(PatchContext {
    ANY,
    SIDECAR_INBOUND,
    SIDECAR_OUTBOUND,
    GATEWAY,
    WAYPOINT
});

istio_enum!(PatchOperation {
    INVALID,
    MERGE,
    ADD,
    REMOVE,
    INSERT_BEFORE,
    INSERT_AFTER,
    INSERT_FIRST,
    REPLACE
});

istio_enum!(FilterClass {
    UNSPECIFIED,
    AUTHN,
    AUTHZ,
    STATS
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyConfigObjectPatch {
    #[serde(default)]
    pub apply_to: ApplyTo,
    #[serde(rename = "match")]
    pub match_: Option<EnvoyConfigObjectMatch>,
    pub patch: Option<EnvoyPatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyConfigObjectMatch {
    #[serde(default)]
    pub context: PatchContext,
    pub proxy: Option<ProxyMatch>,
    pub listener: Option<ListenerMatch>,
    pub route_configuration: Option<RouteConfigurationMatch>,
    pub cluster: Option<ClusterMatch>,
    /// Only with context WAYPOINT.
    pub waypoint: Option<WaypointMatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaypointMatch {
    #[serde(default)]
    pub port_number: u32,
    pub route: Option<WaypointRouteMatch>,
    pub filter: Option<FilterMatch>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaypointRouteMatch {
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyMatch {
    #[serde(default)]
    pub proxy_version: String,
    #[serde(default)]
    pub metadata: Labels,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerMatch {
    #[serde(default)]
    pub port_number: u32,
    #[serde(default)]
    pub port_name: String,
    pub filter_chain: Option<FilterChainMatch>,
    pub listener_filter: Option<String>,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterChainMatch {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub sni: String,
    #[serde(default)]
    pub transport_protocol: String,
    #[serde(default)]
    pub application_protocols: String,
    pub filter: Option<FilterMatch>,
    pub destination_port: Option<u32>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterMatch {
    #[serde(default)]
    pub name: String,
    pub sub_filter: Option<SubFilterMatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubFilterMatch {
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteConfigurationMatch {
    #[serde(default)]
    pub port_number: u32,
    #[serde(default)]
    pub port_name: String,
    #[serde(default)]
    pub gateway: String,
    pub vhost: Option<VirtualHostMatch>,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualHostMatch {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub domain_name: String,
    pub route: Option<RouteMatch>,
}

istio_enum!(RouteAction {
    ANY,
    ROUTE,
    REDIRECT,
    DIRECT_RESPONSE
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteMatch {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub action: RouteAction,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterMatch {
    #[serde(default)]
    pub port_number: u32,
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub subset: String,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyPatch {
    #[serde(default)]
    pub operation: PatchOperation,
    /// A `google.protobuf.Struct`: free-form Envoy config, checked when it is applied.
    pub value: Option<serde_json::Value>,
    #[serde(default)]
    pub filter_class: FilterClass,
}

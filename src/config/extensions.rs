//! extensions.istio.io: `WasmPlugin` and `TrafficExtension` (new in Istio 1.30), field for field
//! with istio.io/api `extensions/v1alpha1`.

use super::common::{PolicyTargetReference, WorkloadSelector};
use super::networking::{PortSelector, istio_enum};
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmPlugin {
    pub selector: Option<WorkloadSelector>,
    pub target_ref: Option<PolicyTargetReference>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub sha256: String,
    pub image_pull_policy: Option<PullPolicy>,
    #[serde(default)]
    pub image_pull_secret: String,
    #[serde(default)]
    pub verification_key: String,
    pub plugin_config: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub plugin_name: String,
    pub phase: Option<PluginPhase>,
    pub priority: Option<i32>,
    pub fail_strategy: Option<FailStrategy>,
    pub vm_config: Option<VmConfig>,
    #[serde(default, rename = "match")]
    pub matches: Vec<TrafficSelector>,
    #[serde(rename = "type")]
    pub plugin_type: Option<PluginType>,
}

/// A Lua or Wasm filter for the workloads it selects (or the gateways its `targetRefs` name), at
/// a phase and priority.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficExtension {
    pub selector: Option<WorkloadSelector>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    pub phase: Option<ExtensionPhase>,
    pub priority: Option<i32>,
    #[serde(default, rename = "match")]
    pub matches: Vec<TrafficSelector>,
    pub wasm: Option<WasmConfig>,
    pub lua: Option<LuaConfig>,
}

/// A TrafficExtension's Wasm module: WasmPlugin's fields without selection.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmConfig {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub sha256: String,
    pub image_pull_policy: Option<PullPolicy>,
    #[serde(default)]
    pub image_pull_secret: String,
    #[serde(default)]
    pub verification_key: String,
    pub plugin_config: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub plugin_name: String,
    pub fail_strategy: Option<FailStrategy>,
    pub vm_config: Option<VmConfig>,
    #[serde(rename = "type")]
    pub plugin_type: Option<PluginType>,
}

/// A TrafficExtension's Lua script, inline.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LuaConfig {
    #[serde(default)]
    pub inline_code: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficSelector {
    pub mode: Option<WorkloadMode>,
    #[serde(default)]
    pub ports: Vec<PortSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VmConfig {
    #[serde(default)]
    pub env: Vec<EnvVar>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    #[serde(default)]
    pub name: String,
    pub value_from: Option<EnvValueSource>,
    #[serde(default)]
    pub value: String,
}

istio_enum!(PluginType {
    UNSPECIFIED_PLUGIN_TYPE,
    HTTP,
    NETWORK
});
istio_enum!(PluginPhase {
    UNSPECIFIED_PHASE,
    AUTHN,
    AUTHZ,
    STATS
});
istio_enum!(ExtensionPhase {
    UNSPECIFIED,
    AUTHN,
    AUTHZ,
    STATS
});
istio_enum!(PullPolicy {
    UNSPECIFIED_POLICY,
    IfNotPresent,
    Always
});
istio_enum!(EnvValueSource { INLINE, HOST });
istio_enum!(FailStrategy {
    FAIL_CLOSE,
    FAIL_OPEN,
    FAIL_RELOAD
});
istio_enum!(WorkloadMode {
    UNDEFINED,
    CLIENT,
    SERVER,
    CLIENT_AND_SERVER
});

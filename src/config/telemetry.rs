//! telemetry.istio.io (v1, v1alpha1): field for field with istio.io/api `telemetry/v1alpha1`.

use super::common::{Duration, PolicyTargetReference, WorkloadSelector};
use super::networking::istio_enum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Telemetry {
    pub selector: Option<WorkloadSelector>,
    pub target_ref: Option<PolicyTargetReference>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub tracing: Vec<Tracing>,
    #[serde(default)]
    pub metrics: Vec<Metrics>,
    #[serde(default)]
    pub access_logging: Vec<AccessLogging>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderRef {
    #[serde(default)]
    pub name: String,
}

istio_enum!(WorkloadMode {
    CLIENT_AND_SERVER,
    CLIENT,
    SERVER
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadModeSelector {
    #[serde(default)]
    pub mode: WorkloadMode,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tracing {
    #[serde(rename = "match")]
    pub match_: Option<WorkloadModeSelector>,
    #[serde(default)]
    pub providers: Vec<ProviderRef>,
    pub random_sampling_percentage: Option<f64>,
    pub disable_span_reporting: Option<bool>,
    #[serde(default)]
    pub custom_tags: BTreeMap<String, CustomTag>,
    pub use_request_id_for_trace_sampling: Option<bool>,
    pub enable_istio_tags: Option<bool>,
    pub disable_context_propagation: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum CustomTag {
    Literal(LiteralTag),
    Environment(EnvironmentTag),
    Header(HeaderTag),
    /// A value written with Envoy's command operators (`%REQ(x-user)%`), new in Istio 1.30.
    Formatter(FormatterTag),
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LiteralTag {
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FormatterTag {
    #[serde(default)]
    pub value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentTag {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub default_value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderTag {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub default_value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metrics {
    #[serde(default)]
    pub providers: Vec<ProviderRef>,
    #[serde(default)]
    pub overrides: Vec<MetricsOverrides>,
    pub reporting_interval: Option<Duration>,
}

istio_enum!(IstioMetric {
    ALL_METRICS,
    REQUEST_COUNT,
    REQUEST_DURATION,
    REQUEST_SIZE,
    RESPONSE_SIZE,
    TCP_OPENED_CONNECTIONS,
    TCP_CLOSED_CONNECTIONS,
    TCP_SENT_BYTES,
    TCP_RECEIVED_BYTES,
    GRPC_REQUEST_MESSAGES,
    GRPC_RESPONSE_MESSAGES
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricSelector {
    pub metric: Option<IstioMetric>,
    pub custom_metric: Option<String>,
    #[serde(default)]
    pub mode: WorkloadMode,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsOverrides {
    #[serde(rename = "match")]
    pub match_: Option<MetricSelector>,
    pub disabled: Option<bool>,
    #[serde(default)]
    pub tag_overrides: BTreeMap<String, TagOverride>,
}

istio_enum!(TagOperation { UPSERT, REMOVE });

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TagOverride {
    #[serde(default)]
    pub operation: TagOperation,
    pub value: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessLogging {
    #[serde(rename = "match")]
    pub match_: Option<WorkloadModeSelector>,
    #[serde(default)]
    pub providers: Vec<ProviderRef>,
    pub disabled: Option<bool>,
    pub filter: Option<AccessLogFilter>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessLogFilter {
    #[serde(default)]
    pub expression: String,
}

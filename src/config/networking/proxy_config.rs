//! ProxyConfig (networking.istio.io/v1beta1).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyConfig {
    pub selector: Option<crate::config::common::WorkloadSelector>,
    pub concurrency: Option<i32>,
    #[serde(default)]
    pub environment_variables: BTreeMap<String, String>,
    pub image: Option<ProxyImage>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyImage {
    #[serde(default)]
    pub image_type: String,
}

//! A proxy's config as the comparison reads it: resources by type and name, each as proto3 JSON
//! (JSON field names, defaults left out), read from generated resources, from an admin
//! `ConfigDump` (istiod's and Rudder's `istio.io/debug/config_dump`) or from Envoy's own
//! `/config_dump` JSON (proto field names). Going through the message descriptors makes the three
//! agree on spelling: `connect_timeout` and `connectTimeout`, `"0s"` and a missing field.

use crate::envoy::json::{Names, pool, to_json};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::admin::v3 as admin;
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The types a comparison covers: what a proxy's behaviour follows from. Secrets are left out
/// (two CAs never issue the same certificate); their names are compared where listeners and
/// clusters name them.
pub const COMPARED: [TypeUrl; 5] = [
    TypeUrl::Cluster,
    TypeUrl::Endpoint,
    TypeUrl::Listener,
    TypeUrl::Route,
    TypeUrl::ExtensionConfig,
];

/// The types a proxy asks for by name, in the order it asks: what its clusters and listeners
/// name.
pub const NAMED: [TypeUrl; 3] = [TypeUrl::Endpoint, TypeUrl::Route, TypeUrl::ExtensionConfig];

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a config dump: {0}")]
    Shape(String),
    #[error("{type_name}: {message}")]
    Message { type_name: String, message: String },
}

/// One proxy's config from one source.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProxyConfig {
    /// Resources by type, then name.
    pub resources: BTreeMap<TypeUrl, BTreeMap<String, Value>>,
    /// Types this source holds (possibly none of): a type only one side holds is not compared.
    pub types: BTreeSet<TypeUrl>,
}

impl ProxyConfig {
    /// Records that this source holds `type_url`, even with no resource of it.
    pub fn hold(&mut self, type_url: TypeUrl) {
        self.types.insert(type_url);
    }

    /// Adds a resource as its encoded message.
    pub fn insert_any(&mut self, type_url: TypeUrl, any: &Any) {
        let json = to_json(&any.type_url, &any.value, Names::Json)
            .unwrap_or_else(|e| Value::String(format!("<undecodable: {e}>")));
        self.insert_json(type_url, json);
    }

    /// Adds a resource already in proto3 JSON with JSON names.
    pub fn insert_json(&mut self, type_url: TypeUrl, mut json: Value) {
        if type_url == TypeUrl::Endpoint {
            normalize_endpoints(&mut json);
        }
        let name = resource_name(type_url, &json);
        self.types.insert(type_url);
        self.resources
            .entry(type_url)
            .or_default()
            .insert(name, json);
    }

    pub fn get(&self, type_url: TypeUrl) -> impl Iterator<Item = (&String, &Value)> {
        self.resources.get(&type_url).into_iter().flatten()
    }

    /// The names a proxy asks for of a type it subscribes to by name (endpoints, routes, filter
    /// configs), from the clusters and listeners it holds; empty for the wildcard types.
    pub fn names_asked(&self, type_url: TypeUrl) -> BTreeSet<String> {
        match type_url {
            TypeUrl::Endpoint => self.eds_names(),
            TypeUrl::Route => self.route_names(),
            TypeUrl::ExtensionConfig => self.extension_config_names(),
            _ => BTreeSet::new(),
        }
    }

    /// Route configurations the listeners name (RDS), for a source that must ask for them.
    pub fn route_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (_, listener) in self.get(TypeUrl::Listener) {
            collect_strings(listener, "routeConfigName", &mut names);
        }
        names
    }

    /// Clusters whose endpoints come from EDS, by the name they ask for.
    pub fn eds_names(&self) -> BTreeSet<String> {
        self.get(TypeUrl::Cluster)
            .filter(|(_, c)| c.get("type").and_then(Value::as_str) == Some("EDS"))
            .map(|(name, c)| {
                c.pointer("/edsClusterConfig/serviceName")
                    .and_then(Value::as_str)
                    .unwrap_or(name)
                    .to_string()
            })
            .collect()
    }

    /// Filter configs the listeners ask for by name (ECDS).
    pub fn extension_config_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (_, listener) in self.get(TypeUrl::Listener) {
            collect_config_discovery(listener, &mut names);
        }
        names
    }

    /// One section of a config dump (istiod answers `istio.io/debug/config_dump` with the
    /// sections as separate resources), or a whole `ConfigDump` (each of its sections).
    /// Sections the comparison does not read are skipped.
    pub fn add_section(&mut self, section: &Any) -> Result<(), ReadError> {
        let name = section.type_url.rsplit('/').next().unwrap_or_default();
        let bytes = section.value.as_slice();
        fn read<D: Message + Default>(name: &str, bytes: &[u8]) -> Result<D, ReadError> {
            D::decode(bytes).map_err(|e| ReadError::Message {
                type_name: name.to_string(),
                message: e.to_string(),
            })
        }
        let (type_url, resources): (TypeUrl, Vec<Any>) = match name {
            "envoy.admin.v3.ClustersConfigDump" => {
                let d: admin::ClustersConfigDump = read(name, bytes)?;
                let all = d.dynamic_active_clusters.into_iter();
                (TypeUrl::Cluster, all.filter_map(|c| c.cluster).collect())
            }
            "envoy.admin.v3.ListenersConfigDump" => {
                let d: admin::ListenersConfigDump = read(name, bytes)?;
                let all = d.dynamic_listeners.into_iter();
                let active = all.filter_map(|l| l.active_state?.listener);
                (TypeUrl::Listener, active.collect())
            }
            "envoy.admin.v3.RoutesConfigDump" => {
                let d: admin::RoutesConfigDump = read(name, bytes)?;
                let all = d.dynamic_route_configs.into_iter();
                (TypeUrl::Route, all.filter_map(|r| r.route_config).collect())
            }
            "envoy.admin.v3.EndpointsConfigDump" => {
                let d: admin::EndpointsConfigDump = read(name, bytes)?;
                let all = d.dynamic_endpoint_configs.into_iter();
                (
                    TypeUrl::Endpoint,
                    all.filter_map(|e| e.endpoint_config).collect(),
                )
            }
            "envoy.admin.v3.ConfigDump" => {
                let d: admin::ConfigDump = read(name, bytes)?;
                return d.configs.iter().try_for_each(|s| self.add_section(s));
            }
            "envoy.admin.v3.EcdsConfigDump" => {
                let d: admin::EcdsConfigDump = read(name, bytes)?;
                let all = d.ecds_filters.into_iter();
                (
                    TypeUrl::ExtensionConfig,
                    all.filter_map(|f| f.ecds_filter).collect(),
                )
            }
            _ => return Ok(()),
        };
        self.hold(type_url);
        for any in &resources {
            self.insert_any(type_url, any);
        }
        Ok(())
    }

    /// Envoy's admin `/config_dump` (or istiod's JSON one), field names either way. Its
    /// bootstrap and static resources are Envoy's own, not sent, and not read.
    pub fn from_config_dump_json(text: &str) -> Result<ProxyConfig, ReadError> {
        let value: Value = serde_json::from_str(text)?;
        let sections = value
            .get("configs")
            .and_then(Value::as_array)
            .ok_or_else(|| ReadError::Shape("no `configs` list".into()))?;
        let mut config = ProxyConfig::default();
        for section in sections {
            let Some(type_url) = section.get("@type").and_then(Value::as_str) else {
                continue;
            };
            let name = type_url.rsplit('/').next().unwrap_or_default();
            if !SECTIONS.contains(&name) {
                continue;
            }
            let mut body = section.clone();
            if let Some(o) = body.as_object_mut() {
                o.remove("@type");
            }
            let bytes = reencode(name, body)?;
            config.add_section(&Any {
                type_url: type_url.to_string(),
                value: bytes,
            })?;
        }
        // Envoy dumps a load assignment for every cluster, EDS or not; only the EDS ones came
        // from the control plane.
        let eds = config.eds_names();
        if let Some(endpoints) = config.resources.get_mut(&TypeUrl::Endpoint) {
            endpoints.retain(|name, _| eds.contains(name));
        }
        Ok(config)
    }
}

/// Envoy's defaults in a load assignment as Envoy fills them in its dump, left out as a control
/// plane leaves them out: the overprovisioning factor of 140 and an empty health-check config.
fn normalize_endpoints(json: &mut Value) {
    if let Some(policy) = json.get_mut("policy").and_then(Value::as_object_mut) {
        if policy.get("overprovisioningFactor") == Some(&Value::from(140)) {
            policy.remove("overprovisioningFactor");
        }
        if policy.is_empty()
            && let Some(o) = json.as_object_mut()
        {
            o.remove("policy");
        }
    }
    for locality in json
        .get_mut("endpoints")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for lb in locality
            .get_mut("lbEndpoints")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(endpoint) = lb.get_mut("endpoint").and_then(Value::as_object_mut)
                && endpoint
                    .get("healthCheckConfig")
                    .is_some_and(|h| h == &serde_json::json!({}))
            {
                endpoint.remove("healthCheckConfig");
            }
        }
    }
}

/// The config dump sections the comparison reads.
const SECTIONS: [&str; 5] = [
    "envoy.admin.v3.ClustersConfigDump",
    "envoy.admin.v3.ListenersConfigDump",
    "envoy.admin.v3.RoutesConfigDump",
    "envoy.admin.v3.EndpointsConfigDump",
    "envoy.admin.v3.EcdsConfigDump",
];

/// `json`, a message of `type_name` in proto3 JSON (either field names), as its encoding.
fn reencode(type_name: &str, json: Value) -> Result<Vec<u8>, ReadError> {
    let error = |message: String| ReadError::Message {
        type_name: type_name.to_string(),
        message,
    };
    let descriptor = pool()
        .map_err(|e| error(e.to_string()))?
        .get_message_by_name(type_name)
        .ok_or_else(|| error("unknown message type".into()))?;
    let message =
        DynamicMessage::deserialize_with_options(descriptor, json, &DeserializeOptions::new())
            .map_err(|e| error(e.to_string()))?;
    Ok(message.encode_to_vec())
}

/// A resource's name: `clusterName` for endpoints, `name` for the rest.
fn resource_name(type_url: TypeUrl, json: &Value) -> String {
    let key = match type_url {
        TypeUrl::Endpoint => "clusterName",
        _ => "name",
    };
    json.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn collect_strings(value: &Value, key: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(o) => {
            for (k, v) in o {
                match v {
                    Value::String(s) if k == key => {
                        out.insert(s.clone());
                    }
                    _ => collect_strings(v, key, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_strings(v, key, out)),
        _ => {}
    }
}

/// Names of `configDiscovery` filters (an HTTP filter whose config comes over ECDS).
fn collect_config_discovery(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(o) => {
            if o.contains_key("configDiscovery")
                && let Some(name) = o.get("name").and_then(Value::as_str)
            {
                out.insert(name.to_string());
            }
            o.values().for_each(|v| collect_config_discovery(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| collect_config_discovery(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envoy_field_names_and_explicit_defaults_read_as_the_json_names_without_them() {
        let envoy = json!({"configs": [
            {"@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
             "bootstrap": {"node": {"id": "x"}}},
            {"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
             "version_info": "7",
             "dynamic_active_clusters": [{"version_info": "7", "cluster": {
                "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                "name": "outbound|80||a.default.svc.cluster.local",
                "type": "EDS",
                "connect_timeout": "10s",
                "lb_policy": "ROUND_ROBIN",
                "eds_cluster_config": {"service_name": "outbound|80||a.default.svc.cluster.local",
                                       "eds_config": {"ads": {}, "resource_api_version": "V3"}}}}]},
        ]});
        let config = ProxyConfig::from_config_dump_json(&envoy.to_string()).unwrap();
        let cluster =
            &config.resources[&TypeUrl::Cluster]["outbound|80||a.default.svc.cluster.local"];
        assert_eq!(cluster["connectTimeout"], "10s");
        assert!(cluster.get("lbPolicy").is_none());
        assert_eq!(
            config.eds_names(),
            BTreeSet::from(["outbound|80||a.default.svc.cluster.local".to_string()])
        );
        assert_eq!(config.types, BTreeSet::from([TypeUrl::Cluster]));
    }

    #[test]
    fn envoys_own_endpoint_defaults_and_non_eds_load_assignments_are_not_read_as_sent() {
        let envoy = json!({"configs": [
            {"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
             "dynamic_active_clusters": [{"cluster": {
                "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                "name": "a", "type": "EDS", "eds_cluster_config": {"eds_config": {"ads": {}}}}},
                {"cluster": {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                "name": "BlackHoleCluster", "type": "STATIC"}}]},
            {"@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
             "dynamic_endpoint_configs": [
                {"endpoint_config": {"@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
                  "cluster_name": "a", "policy": {"overprovisioning_factor": 140},
                  "endpoints": [{"lb_endpoints": [{"endpoint": {"health_check_config": {},
                     "address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}}}]}]}},
                {"endpoint_config": {"@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
                  "cluster_name": "BlackHoleCluster"}}]},
        ]});
        let config = ProxyConfig::from_config_dump_json(&envoy.to_string()).unwrap();
        let endpoints = &config.resources[&TypeUrl::Endpoint];
        assert_eq!(endpoints.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(
            endpoints["a"],
            json!({"clusterName": "a", "endpoints": [{"lbEndpoints": [{"endpoint": {
                "address": {"socketAddress": {"address": "10.0.0.1", "portValue": 80}}}}]}]})
        );
    }

    #[test]
    fn a_section_that_is_not_its_type_is_an_error_not_an_empty_config() {
        let bad = json!({"configs": [{"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
            "dynamic_active_clusters": "nope"}]});
        assert!(ProxyConfig::from_config_dump_json(&bad.to_string()).is_err());
        assert!(ProxyConfig::from_config_dump_json("{}").is_err());
    }

    #[test]
    fn route_and_extension_names_are_found_wherever_a_listener_names_them() {
        let mut config = ProxyConfig::default();
        config.insert_json(
            TypeUrl::Listener,
            json!({"name": "0.0.0.0_80", "filterChains": [{"filters": [{"typedConfig": {
                "rds": {"routeConfigName": "80"},
                "httpFilters": [{"name": "wasm.auth", "configDiscovery": {}}]}}]}]}),
        );
        assert_eq!(config.route_names(), BTreeSet::from(["80".to_string()]));
        assert_eq!(
            config.extension_config_names(),
            BTreeSet::from(["wasm.auth".to_string()])
        );
    }
}

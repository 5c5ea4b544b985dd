//! Proto3 JSON of Envoy's and Istio's messages, as istiod prints them in its debug endpoints
//! (lowerCamelCase names, `@type` in `Any`, defaults left out) or, on request, with the proto field
//! names Envoy's own `/config_dump` uses. Printed through prost-reflect with the descriptor sets the
//! build writes: envoy-types' (every Envoy type Rudder sends) and Rudder's own protos.
//!
//! The descriptors are read the first time something is printed, not at start: a daemon nobody
//! debugs never holds them.

use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use std::sync::LazyLock;

static ENVOY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));
static RUDDER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rudder_descriptors.bin"));

static POOL: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    let mut pool = DescriptorPool::decode(ENVOY).map_err(|e| e.to_string())?;
    pool.decode_file_descriptor_set(RUDDER)
        .map_err(|e| e.to_string())?;
    Ok(pool)
});

#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("descriptors unavailable: {0}")]
    Descriptors(String),
    #[error("unknown message type {0}")]
    UnknownType(String),
    #[error("cannot decode {0}: {1}")]
    Decode(String, prost::DecodeError),
    #[error("cannot print {0}: {1}")]
    Print(String, serde_json::Error),
}

/// Field names: istiod's debug endpoints write JSON names, Envoy's admin writes proto names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Names {
    #[default]
    Json,
    Proto,
}

pub(crate) fn pool() -> Result<&'static DescriptorPool, JsonError> {
    POOL.as_ref().map_err(|e| JsonError::Descriptors(e.clone()))
}

/// `bytes`, a message of type `type_url` (`type.googleapis.com/<full name>` or the bare name), as
/// proto3 JSON.
pub fn to_json(type_url: &str, bytes: &[u8], names: Names) -> Result<serde_json::Value, JsonError> {
    let full_name = type_url.rsplit('/').next().unwrap_or(type_url);
    let descriptor = pool()?
        .get_message_by_name(full_name)
        .ok_or_else(|| JsonError::UnknownType(full_name.to_string()))?;
    let message = DynamicMessage::decode(descriptor, bytes)
        .map_err(|e| JsonError::Decode(full_name.to_string(), e))?;
    let options = SerializeOptions::new()
        .use_proto_field_name(names == Names::Proto)
        .skip_default_fields(true);
    message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| JsonError::Print(full_name.to_string(), e))
}

/// A typed message as proto3 JSON.
pub fn message_to_json<M: prost::Name>(
    message: &M,
    names: Names,
) -> Result<serde_json::Value, JsonError> {
    to_json(&M::full_name(), &message.encode_to_vec(), names)
}

/// As `message_to_json`, printing an error in place of a message that cannot be printed (which
/// only a build without descriptors could produce).
pub fn message_or_error<M: prost::Name>(message: &M, names: Names) -> serde_json::Value {
    message_to_json(message, names)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::admin::v3::{ClustersConfigDump, ConfigDump};
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::google::protobuf::{Any, Duration};
    use prost::Message;

    fn dump() -> ConfigDump {
        let cluster = Cluster {
            name: "outbound|80||web.shop.svc.cluster.local".into(),
            connect_timeout: Some(Duration {
                seconds: 10,
                nanos: 0,
            }),
            ..Default::default()
        };
        let clusters = ClustersConfigDump {
            version_info: "7".into(),
            dynamic_active_clusters: vec![
                envoy_types::pb::envoy::admin::v3::clusters_config_dump::DynamicCluster {
                    cluster: Some(Any {
                        type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                        value: cluster.encode_to_vec(),
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        ConfigDump {
            configs: vec![Any {
                type_url: "type.googleapis.com/envoy.admin.v3.ClustersConfigDump".into(),
                value: clusters.encode_to_vec(),
            }],
        }
    }

    /// As istiod's debug endpoints print it: JSON names, `@type` in every `Any` (nested ones
    /// too), durations as strings, defaults left out.
    #[test]
    fn a_config_dump_prints_as_istiod_prints_it() {
        let json = message_to_json(&dump(), Names::Json).unwrap();
        let clusters = &json["configs"][0];
        assert_eq!(
            clusters["@type"],
            "type.googleapis.com/envoy.admin.v3.ClustersConfigDump"
        );
        assert_eq!(clusters["versionInfo"], "7");
        let cluster = &clusters["dynamicActiveClusters"][0]["cluster"];
        assert_eq!(
            cluster["@type"],
            "type.googleapis.com/envoy.config.cluster.v3.Cluster"
        );
        assert_eq!(cluster["connectTimeout"], "10s");
        assert!(
            cluster.get("type").is_none(),
            "defaults left out: {cluster}"
        );
    }

    /// With proto names, as Envoy's own `/config_dump`, so the two can be diffed.
    #[test]
    fn proto_names_match_envoys_admin() {
        let json = message_to_json(&dump(), Names::Proto).unwrap();
        let cluster = &json["configs"][0]["dynamic_active_clusters"][0]["cluster"];
        assert_eq!(cluster["connect_timeout"], "10s");
    }

    #[test]
    fn rudders_own_messages_print_too() {
        let json = to_json(
            "type.googleapis.com/istio.workload.Address",
            &[],
            Names::Json,
        );
        assert_eq!(json.unwrap(), serde_json::json!({}));
        assert!(matches!(
            to_json("type.googleapis.com/no.such.Type", &[], Names::Json),
            Err(JsonError::UnknownType(_))
        ));
    }
}

//! Envoy messages from user JSON, and protobuf merge on the real Envoy types, as istiod does for
//! EnvoyFilter patches: a patch value is read as proto3 JSON of its type (`@type` resolving the
//! `Any`s inside, unknown fields dropped as istiod's non-strict conversion drops them), and MERGE is
//! protobuf's merge (set scalars replace, repeated fields append, messages merge field by field)
//! with istiod's one exception: a `Duration` is replaced whole (`pkg/proto/merge`). Both work on
//! prost-reflect's dynamic messages over the descriptors [`crate::xds::json`] holds, never on JSON
//! text.

use crate::xds::json::{JsonError, pool};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use prost_reflect::{DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, Value};

/// istiod replaces these whole instead of merging them field by field.
const REPLACED_WHOLE: &[&str] = &["google.protobuf.Duration"];

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Json(#[from] JsonError),
    #[error("{0}")]
    Invalid(String),
    #[error("cannot merge a {0} into a {1}")]
    TypeMismatch(String, String),
}

fn descriptor(full_name: &str) -> Result<MessageDescriptor, MergeError> {
    pool()?
        .get_message_by_name(full_name)
        .ok_or_else(|| JsonError::UnknownType(full_name.to_string()).into())
}

/// `value`, proto3 JSON (JSON or proto field names), as an `M`.
pub fn from_json<M: Message + Default + Name>(value: &serde_json::Value) -> Result<M, MergeError> {
    let desc = descriptor(&M::full_name())?;
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(desc, value, &options)
        .map_err(|e| MergeError::Invalid(e.to_string()))?;
    M::decode(message.encode_to_vec().as_slice())
        .map_err(|e| MergeError::Invalid(format!("{}: {e}", M::full_name())))
}

/// Whether the descriptors know message `full_name`.
pub fn knows(full_name: &str) -> bool {
    descriptor(full_name).is_ok()
}

/// Checks that `value` reads as proto3 JSON of message `full_name`; `strict` refuses unknown
/// fields too (istiod warns about those and denies the rest).
pub fn check_json(
    full_name: &str,
    value: &serde_json::Value,
    strict: bool,
) -> Result<(), MergeError> {
    let options = DeserializeOptions::new().deny_unknown_fields(strict);
    DynamicMessage::deserialize_with_options(descriptor(full_name)?, value, &options)
        .map(|_| ())
        .map_err(|e| MergeError::Invalid(e.to_string()))
}

fn dynamic(full_name: &str, bytes: &[u8]) -> Result<DynamicMessage, MergeError> {
    DynamicMessage::decode(descriptor(full_name)?, bytes)
        .map_err(|e| JsonError::Decode(full_name.to_string(), e).into())
}

/// Merges `src` into `dst`, as istiod's `merge.Merge`.
pub fn merge<M: Message + Default + Name>(dst: &mut M, src: &M) -> Result<(), MergeError> {
    let name = M::full_name();
    let mut into = dynamic(&name, &dst.encode_to_vec())?;
    merge_dynamic(&mut into, &dynamic(&name, &src.encode_to_vec())?);
    *dst = M::decode(into.encode_to_vec().as_slice())
        .map_err(|e| MergeError::Invalid(format!("{name}: {e}")))?;
    Ok(())
}

/// Merges the message inside `src` into the one inside `dst`, which must be of the same type
/// (istiod's `MergeAnyWithAny`).
pub fn merge_any(dst: &Any, src: &Any) -> Result<Any, MergeError> {
    if dst.type_url != src.type_url {
        return Err(MergeError::TypeMismatch(
            src.type_url.clone(),
            dst.type_url.clone(),
        ));
    }
    let name = dst.type_url.rsplit('/').next().unwrap_or(&dst.type_url);
    let mut into = dynamic(name, &dst.value)?;
    merge_dynamic(&mut into, &dynamic(name, &src.value)?);
    Ok(Any {
        type_url: dst.type_url.clone(),
        value: into.encode_to_vec(),
    })
}

fn merge_dynamic(dst: &mut DynamicMessage, src: &DynamicMessage) {
    for (field, value) in src.fields() {
        match value {
            Value::List(items) => {
                if let Value::List(existing) = dst.get_field_mut(&field) {
                    existing.extend(items.iter().cloned());
                }
            }
            Value::Map(entries) => {
                if let Value::Map(existing) = dst.get_field_mut(&field) {
                    existing.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            Value::Message(message) => {
                let whole = match field.kind() {
                    Kind::Message(m) => REPLACED_WHOLE.contains(&m.full_name()),
                    _ => true,
                };
                if !whole
                    && dst.has_field(&field)
                    && let Value::Message(existing) = dst.get_field_mut(&field)
                {
                    merge_dynamic(existing, message);
                    continue;
                }
                dst.set_field(&field, value.clone());
            }
            _ => dst.set_field(&field, value.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
    use envoy_types::pb::google::protobuf::Duration;

    /// Protobuf merge as istiod's: set fields replace, lists append, messages merge, a Duration
    /// is replaced whole (10s merged with 0.5s is 0.5s, not 10.5s), a oneof takes the new member.
    #[test]
    fn merge_is_protobufs_with_durations_replaced() {
        let mut dst: Cluster = from_json(&serde_json::json!({
            "name": "outbound|80||web",
            "connectTimeout": "10s",
            "type": "EDS",
            "circuitBreakers": {"thresholds": [{"maxConnections": 5}]},
            "upstreamConnectionOptions": {"tcpKeepalive": {"keepaliveProbes": 3, "keepaliveTime": 10}},
        }))
        .unwrap();
        let src: Cluster = from_json(&serde_json::json!({
            "connect_timeout": "0.5s",
            "circuitBreakers": {"thresholds": [{"maxConnections": 7}]},
            "upstreamConnectionOptions": {"tcpKeepalive": {"keepaliveTime": 20}},
            "type": "STRICT_DNS",
            "unknownField": true,
        }))
        .unwrap();
        merge(&mut dst, &src).unwrap();
        assert_eq!(
            dst.connect_timeout,
            Some(Duration {
                seconds: 0,
                nanos: 500_000_000
            })
        );
        assert_eq!(dst.name, "outbound|80||web");
        assert_eq!(dst.circuit_breakers.unwrap().thresholds.len(), 2);
        let keepalive = dst
            .upstream_connection_options
            .unwrap()
            .tcp_keepalive
            .unwrap();
        assert_eq!(keepalive.keepalive_time.map(|v| v.value), Some(20));
        assert_eq!(keepalive.keepalive_probes.map(|v| v.value), Some(3));
        let json = crate::xds::json::message_to_json(
            &Cluster {
                cluster_discovery_type: dst.cluster_discovery_type,
                ..Default::default()
            },
            crate::xds::json::Names::Json,
        )
        .unwrap();
        assert_eq!(json["type"], "STRICT_DNS", "{json}");
    }

    /// A filter's typed config in `@type` JSON becomes the typed `Any`; two configs of one type
    /// merge inside the `Any`, two of different types do not.
    #[test]
    fn any_configs_read_and_merge_by_their_type() {
        let filter: HttpFilter = from_json(&serde_json::json!({
            "name": "envoy.filters.http.lua",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                "defaultSourceCode": {"inlineString": "function envoy_on_response(h) end"},
            },
        }))
        .unwrap();
        let Some(
            envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(any),
        ) = filter.config_type
        else {
            panic!("typed config");
        };
        assert!(any.type_url.ends_with("lua.v3.Lua"));
        let patch: HttpFilter = from_json(&serde_json::json!({
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                "statPrefix": "mine",
            },
        }))
        .unwrap();
        let Some(
            envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(patch_any),
        ) = patch.config_type
        else {
            panic!("typed config");
        };
        let merged = merge_any(&any, &patch_any).unwrap();
        let json = crate::xds::json::to_json(
            &merged.type_url,
            &merged.value,
            crate::xds::json::Names::Json,
        )
        .unwrap();
        assert_eq!(json["statPrefix"], "mine");
        assert!(
            json["defaultSourceCode"]["inlineString"].is_string(),
            "{json}"
        );
        let other = Any {
            type_url: "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router".into(),
            value: Vec::new(),
        };
        assert!(merge_any(&any, &other).is_err());
        assert!(
            from_json::<HttpFilter>(
                &serde_json::json!({"typed_config": {"@type": "type.googleapis.com/no.such.Type"}})
            )
            .is_err()
        );
    }
}

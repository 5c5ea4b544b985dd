//! Envoy messages from user JSON, and protobuf merge on the real Envoy types, as istiod does for
//! EnvoyFilter patches: a patch value is read as proto3 JSON of its type (`@type` resolving the
//! `Any`s inside, unknown fields dropped as istiod's non-strict conversion drops them), and MERGE is
//! protobuf's merge (set scalars replace, repeated fields append, messages merge field by field)
//! with istiod's one exception: a `Duration` is replaced whole (`pkg/proto/merge`). Both work on
//! the descriptors [`crate::envoy::json`] holds, never on JSON text.
//!
//! Merge is protobuf's wire merge (decoding a message's bytes into another), which is exactly
//! protobuf merge, with the patch's bytes prepared once ([`merge_plan`]): every Duration it sets
//! along singular fields is written with both of its fields, zeros included, so that decoding it
//! replaces the Duration rather than merging into it. Applying a patch is then one decode of a
//! few bytes into the typed resource.

use crate::envoy::json::{JsonError, pool};
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

/// The names of the filters (or other extensions) in `value`, a `full_name` as proto3 JSON,
/// that are given by name without `typed_config` (nor `config_discovery`), a form Envoy is
/// retiring: istiod's `recurseMissingTypedConfig`, which looks through singular message fields
/// only.
pub fn missing_typed_config(
    full_name: &str,
    value: &serde_json::Value,
) -> Result<Vec<String>, MergeError> {
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(descriptor(full_name)?, value, &options)
        .map_err(|e| MergeError::Invalid(e.to_string()))?;
    let mut out = Vec::new();
    untyped(&message, &mut out);
    Ok(out)
}

fn untyped(message: &DynamicMessage, out: &mut Vec<String>) {
    use prost_reflect::ReflectMessage;
    let desc = message.descriptor();
    let name = desc
        .fields()
        .find(|f| f.json_name() == "name")
        .and_then(|f| message.get_field(&f).as_str().map(str::to_string))
        .unwrap_or_default();
    let (mut requires, mut has) = (false, false);
    for field in desc.fields() {
        let set = message.has_field(&field);
        requires |= field.json_name() == "typedConfig";
        has |= set && matches!(field.json_name(), "typedConfig" | "configDiscovery");
        if set
            && !field.is_list()
            && !field.is_map()
            && let prost_reflect::Value::Message(inner) = message.get_field(&field).as_ref()
        {
            untyped(inner, out);
        }
    }
    if requires && !has {
        out.push(name);
    }
}

fn dynamic(full_name: &str, bytes: &[u8]) -> Result<DynamicMessage, MergeError> {
    DynamicMessage::decode(descriptor(full_name)?, bytes)
        .map_err(|e| JsonError::Decode(full_name.to_string(), e).into())
}

/// Merges `src` into `dst`, as istiod's `merge.Merge`.
pub fn merge<M: Message + Default + Name>(dst: &mut M, src: &M) -> Result<(), MergeError> {
    let plan = merge_plan(&M::full_name(), &src.encode_to_vec())?;
    apply_plan(dst, &plan)
}

/// Merges a prepared patch ([`merge_plan`]) into `dst`.
pub fn apply_plan<M: Message>(dst: &mut M, plan: &[u8]) -> Result<(), MergeError> {
    dst.merge(plan)
        .map_err(|e| MergeError::Invalid(format!("merge: {e}")))
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
    let mut bytes = dst.value.clone();
    bytes.extend_from_slice(&merge_plan(name, &src.value)?);
    // Decoded and encoded again, so the result is one canonical message, not two concatenated.
    Ok(Any {
        type_url: dst.type_url.clone(),
        value: dynamic(name, &bytes)?.encode_to_vec(),
    })
}

/// `src`, an encoded `full_name`, rewritten so that decoding it into another message is istiod's
/// merge: each Duration reached through singular message fields (oneof members included) is
/// written with both fields, so it replaces the one it lands on. Repeated fields and maps are
/// copied as they are (their elements are appended or replaced whole anyway).
pub fn merge_plan(full_name: &str, src: &[u8]) -> Result<Vec<u8>, MergeError> {
    let desc = descriptor(full_name)?;
    let mut out = Vec::with_capacity(src.len() + 8);
    rewrite(&desc, src, &mut out)?;
    Ok(out)
}

fn rewrite(desc: &MessageDescriptor, mut buf: &[u8], out: &mut Vec<u8>) -> Result<(), MergeError> {
    use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
    let bad = |e: prost::DecodeError| MergeError::Invalid(e.to_string());
    while !buf.is_empty() {
        let start = buf;
        let (tag, wire) = decode_key(&mut buf).map_err(bad)?;
        match wire {
            WireType::Varint => {
                decode_varint(&mut buf).map_err(bad)?;
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let n = if wire == WireType::SixtyFourBit { 8 } else { 4 };
                buf = buf
                    .get(n..)
                    .ok_or_else(|| MergeError::Invalid("truncated".into()))?;
            }
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut buf).map_err(bad)?)
                    .map_err(|_| MergeError::Invalid("length".into()))?;
                let payload = buf
                    .get(..len)
                    .ok_or_else(|| MergeError::Invalid("truncated".into()))?;
                buf = &buf[len..];
                let singular_message = desc.get_field(tag).and_then(|f| match f.kind() {
                    Kind::Message(m) if !f.is_list() && !f.is_map() => Some(m),
                    _ => None,
                });
                if let Some(m) = singular_message {
                    let mut inner = Vec::with_capacity(payload.len() + 4);
                    if REPLACED_WHOLE.contains(&m.full_name()) {
                        // Both fields, zeros included: decoding sets each of them.
                        let d = DynamicMessage::decode(m.clone(), payload)
                            .map_err(|e| MergeError::Invalid(e.to_string()))?;
                        for field in m.fields() {
                            let v = d.get_field(&field);
                            let n = match v.as_ref() {
                                Value::I64(n) => *n as u64,
                                Value::I32(n) => *n as i64 as u64,
                                _ => 0,
                            };
                            encode_key(field.number(), WireType::Varint, &mut inner);
                            encode_varint(n, &mut inner);
                        }
                    } else {
                        rewrite(&m, payload, &mut inner)?;
                    }
                    encode_key(tag, WireType::LengthDelimited, out);
                    encode_varint(inner.len() as u64, out);
                    out.extend_from_slice(&inner);
                    continue;
                }
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(MergeError::Invalid("groups are not supported".into()));
            }
        }
        out.extend_from_slice(&start[..start.len() - buf.len()]);
    }
    Ok(())
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
        let json = crate::envoy::json::message_to_json(
            &Cluster {
                cluster_discovery_type: dst.cluster_discovery_type,
                ..Default::default()
            },
            crate::envoy::json::Names::Json,
        )
        .unwrap();
        assert_eq!(json["type"], "STRICT_DNS", "{json}");
    }

    /// Durations deep inside a oneof member are replaced whole too, a repeated field's elements
    /// are appended as they are, and a oneof set to another member replaces the first.
    #[test]
    fn nested_durations_replace_and_lists_append() {
        use envoy_types::pb::envoy::config::route::v3::{Route, route};
        let mut dst: Route = from_json(&serde_json::json!({
            "name": "r",
            "route": {"cluster": "a", "timeout": "10s", "retryPolicy": {"numRetries": 2, "perTryTimeout": "3s"}},
            "requestHeadersToAdd": [{"header": {"key": "x-a", "value": "1"}}],
        }))
        .unwrap();
        let src: Route = from_json(&serde_json::json!({
            "route": {"timeout": "0.5s", "retryPolicy": {"perTryTimeout": "0.2s"}},
            "requestHeadersToAdd": [{"header": {"key": "x-b", "value": "2"}}],
        }))
        .unwrap();
        merge(&mut dst, &src).unwrap();
        let Some(route::Action::Route(action)) = &dst.action else {
            panic!("route action");
        };
        assert_eq!(
            action.cluster_specifier,
            Some(
                envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier::Cluster(
                    "a".into()
                )
            )
        );
        assert_eq!(
            action.timeout.map(|d| (d.seconds, d.nanos)),
            Some((0, 500_000_000))
        );
        let retry = action.retry_policy.clone().unwrap();
        assert_eq!(retry.num_retries.map(|v| v.value), Some(2));
        assert_eq!(
            retry.per_try_timeout.map(|d| (d.seconds, d.nanos)),
            Some((0, 200_000_000))
        );
        assert_eq!(dst.request_headers_to_add.len(), 2);
        let redirect: Route =
            from_json(&serde_json::json!({"redirect": {"pathRedirect": "/x"}})).unwrap();
        merge(&mut dst, &redirect).unwrap();
        assert!(matches!(dst.action, Some(route::Action::Redirect(_))));
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
        let json = crate::envoy::json::to_json(
            &merged.type_url,
            &merged.value,
            crate::envoy::json::Names::Json,
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

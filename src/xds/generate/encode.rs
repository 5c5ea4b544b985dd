//! Protobuf bytes as the generators send them: a message packed in `Any`, and the few messages
//! whose maps must be encoded in key order so that the same config always gives the same bytes
//! (prost encodes a `HashMap` in its iteration order).

use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

pub fn any<T: Message + Name>(msg: &T) -> Any {
    Any {
        type_url: T::type_url(),
        value: msg.encode_to_vec(),
    }
}

/// Appends map entries `field: {1: key, 2: value}` in key order. Envoy's proto maps are Rust
/// HashMaps, encoded in hash order: the same config would give different bytes on every build (and
/// a push each time). Messages are encoded with the map left empty and its entries appended here
/// (protobuf fields may come in any order).
pub fn encode_sorted_map<'a, M: prost::Message + 'a>(
    field: u32,
    entries: impl IntoIterator<Item = (&'a String, &'a M)>,
    out: &mut Vec<u8>,
) {
    use prost::encoding::{WireType, encode_key, encode_varint};
    for (key, value) in entries {
        let mut entry = Vec::new();
        prost::encoding::string::encode(1, key, &mut entry);
        prost::encoding::message::encode(2, value, &mut entry);
        encode_key(field, WireType::LengthDelimited, out);
        encode_varint(entry.len() as u64, out);
        out.extend_from_slice(&entry);
    }
}

/// A load assignment's bytes with every endpoint's metadata encoded in key order (maps of
/// metadata namespaces, and of each namespace's fields). Endpoint metadata with one key (the
/// common case) needs nothing of it and is encoded as it is.
pub fn encode_load_assignment(
    cla: &envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment,
) -> Vec<u8> {
    use prost::Message;
    let unordered = cla
        .endpoints
        .iter()
        .flat_map(|g| &g.lb_endpoints)
        .filter_map(|l| l.metadata.as_ref())
        .any(|m| {
            m.filter_metadata.len() > 1 || m.filter_metadata.values().any(|s| s.fields.len() > 1)
        });
    if !unordered {
        return cla.encode_to_vec();
    }
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints,
    };
    // Each level is encoded as a shell without its children, then the children in order: the
    // shells copy every field but the children, so nothing below is cloned (exhaustive
    // literals: a field added to Envoy's types must be named here).
    let shell = ClusterLoadAssignment {
        cluster_name: cla.cluster_name.clone(),
        endpoints: Vec::new(),
        named_endpoints: cla.named_endpoints.clone(),
        policy: cla.policy.clone(),
    };
    let mut out = shell.encode_to_vec();
    for group in &cla.endpoints {
        let shell = LocalityLbEndpoints {
            locality: group.locality.clone(),
            metadata: group.metadata.clone(),
            lb_endpoints: Vec::new(),
            load_balancing_weight: group.load_balancing_weight,
            priority: group.priority,
            proximity: group.proximity,
            lb_config: group.lb_config.clone(),
        };
        let mut group_bytes = shell.encode_to_vec();
        for lb in &group.lb_endpoints {
            // Field by field, in field order (as prost would), the metadata key-ordered.
            let LbEndpoint {
                host_identifier,
                health_status,
                metadata,
                load_balancing_weight,
            } = lb;
            let mut lb_bytes = Vec::new();
            if let Some(host) = host_identifier {
                host.encode(&mut lb_bytes);
            }
            if *health_status != 0 {
                prost::encoding::int32::encode(2, health_status, &mut lb_bytes);
            }
            if let Some(m) = metadata {
                put_field(3, &encode_metadata(m), &mut lb_bytes);
            }
            if let Some(weight) = load_balancing_weight {
                prost::encoding::message::encode(4, weight, &mut lb_bytes);
            }
            put_field(2, &lb_bytes, &mut group_bytes);
        }
        put_field(2, &group_bytes, &mut out);
    }
    out
}

/// `Metadata` with its namespaces and their fields in key order.
fn encode_metadata(m: &envoy_types::pb::envoy::config::core::v3::Metadata) -> Vec<u8> {
    use envoy_types::pb::envoy::config::core::v3::Metadata;
    use prost::Message;
    // The typed metadata as prost encodes it (nearly always none), then the namespaces in order.
    let mut out = if m.typed_filter_metadata.is_empty() {
        Vec::new()
    } else {
        Metadata {
            filter_metadata: Default::default(),
            typed_filter_metadata: m.typed_filter_metadata.clone(),
        }
        .encode_to_vec()
    };
    let mut namespaces: Vec<_> = m.filter_metadata.iter().collect();
    namespaces.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (key, value) in namespaces {
        let mut fields: Vec<_> = value.fields.iter().collect();
        fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut struct_bytes = Vec::new();
        encode_sorted_map(1, fields, &mut struct_bytes);
        let mut entry = Vec::new();
        prost::encoding::string::encode(1, key, &mut entry);
        put_field(2, &struct_bytes, &mut entry);
        put_field(1, &entry, &mut out);
    }
    out
}

/// Appends `bytes` as length-delimited field `tag`.
pub fn put_field(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    use prost::encoding::{WireType, encode_key, encode_varint};
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Endpoint metadata with several namespaces and fields encodes to the same bytes whatever
    /// the maps' hash order, and decodes to what was built.
    #[test]
    fn load_assignments_encode_metadata_in_key_order() {
        use envoy_types::pb::envoy::config::core::v3::Metadata;
        use envoy_types::pb::envoy::config::endpoint::v3::{
            ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints,
        };
        use envoy_types::pb::google::protobuf::{Struct, Value, value};
        use prost::Message;
        let build = || {
            let string = |s: &str| Value {
                kind: Some(value::Kind::StringValue(s.into())),
            };
            let fields = |pairs: &[(&str, &str)]| Struct {
                fields: pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), string(v)))
                    .collect(),
            };
            ClusterLoadAssignment {
                cluster_name: "c".into(),
                endpoints: vec![LocalityLbEndpoints {
                    lb_endpoints: vec![LbEndpoint {
                        metadata: Some(Metadata {
                            filter_metadata: [
                                (
                                    "b".to_string(),
                                    fields(&[("x", "1"), ("y", "2"), ("z", "3")]),
                                ),
                                ("a".to_string(), fields(&[("w", "0")])),
                                ("c".to_string(), fields(&[("q", "9"), ("p", "8")])),
                            ]
                            .into(),
                            ..Default::default()
                        }),
                        host_identifier: Some(
                            envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::EndpointName("e".into()),
                        ),
                        health_status: 2,
                        load_balancing_weight: Some(envoy_types::pb::google::protobuf::UInt32Value { value: 3 }),
                    }],
                    priority: 1,
                    ..Default::default()
                }],
                ..Default::default()
            }
        };
        let first = encode_load_assignment(&build());
        for _ in 0..20 {
            assert_eq!(encode_load_assignment(&build()), first);
        }
        assert_eq!(
            ClusterLoadAssignment::decode(first.as_slice()).unwrap(),
            build()
        );
    }
}

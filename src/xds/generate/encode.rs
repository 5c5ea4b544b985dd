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
    let mut shell = cla.clone();
    shell.endpoints.clear();
    let mut out = shell.encode_to_vec();
    for group in &cla.endpoints {
        let mut g = group.clone();
        g.lb_endpoints.clear();
        let mut group_bytes = g.encode_to_vec();
        for lb in &group.lb_endpoints {
            let mut l = lb.clone();
            let metadata = l.metadata.take();
            let mut lb_bytes = l.encode_to_vec();
            if let Some(m) = metadata {
                put_field(3, &encode_metadata(&m), &mut lb_bytes);
            }
            put_field(2, &lb_bytes, &mut group_bytes);
        }
        put_field(2, &group_bytes, &mut out);
    }
    out
}

/// `Metadata` with its namespaces and their fields in key order.
fn encode_metadata(m: &envoy_types::pb::envoy::config::core::v3::Metadata) -> Vec<u8> {
    use prost::Message;
    let mut shell = m.clone();
    shell.filter_metadata.clear();
    let mut out = shell.encode_to_vec();
    let sorted: std::collections::BTreeMap<&String, _> = m.filter_metadata.iter().collect();
    for (key, value) in sorted {
        let mut fields = Vec::new();
        let ordered: std::collections::BTreeMap<&String, _> = value.fields.iter().collect();
        encode_sorted_map(1, ordered, &mut fields);
        let mut entry = Vec::new();
        prost::encoding::string::encode(1, key, &mut entry);
        put_field(2, &fields, &mut entry);
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
                        ..Default::default()
                    }],
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

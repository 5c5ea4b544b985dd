//! Envoy's messages without the xDS server: their proto3 JSON (`json`, read through the
//! descriptor sets the build writes) and protobuf merge of user JSON onto them (`proto_merge`,
//! for EnvoyFilter patches). A leaf: validation, the generators, the debug pages and `compare`
//! read Envoy's types here, and none of them needs the server for it.

pub mod json;
pub mod proto_merge;

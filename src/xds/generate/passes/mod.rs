//! The finishing passes: they run on every role's built listeners (and clusters) after the role's
//! builder, in the order `finish` lists them: extensions (TrafficExtension, WasmPlugin), Istio's
//! stats, access logs (with their gRPC providers), tracing, and EnvoyFilter last.

pub mod access_log;
pub mod envoy_filter;
pub mod grpc_log;
pub mod stats;
pub mod tracing;
pub mod traffic_extension;

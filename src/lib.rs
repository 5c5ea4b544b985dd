//! Rudder: an Istio-compatible service-mesh control plane. See `docs/architecture.md`.

pub mod activity;
pub mod admin;
pub mod analysis;
pub mod autoregistration;
pub mod ca;
pub mod cmd;
pub mod compare;
pub mod config;
pub mod envoy;
pub mod gateway_deploy;
pub mod grpc;
pub mod k8s;
pub mod logging;
pub mod metrics;
pub mod model;
#[cfg(feature = "fuzzing")]
pub mod robustness;
pub mod source;
pub mod status;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod validation;
pub mod webhook;
pub mod xds;

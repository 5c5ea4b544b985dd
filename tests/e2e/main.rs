//! End-to-end tests: the real `rudder` binary (and, where traffic decides, real Envoy, gRPC
//! clients, ztunnel and a Kubernetes API server) driven as users drive it. One binary, so the
//! daemon and the shared helpers (`common`) are built and linked once. Run one file with
//! `cargo test --test e2e gateway::`.

#![recursion_limit = "256"]

mod common;

mod ads_protocol;
mod ambient;
mod ambient_east_west;
mod autoregistration;
mod backend_tls;
mod ca;
mod change_safety;
mod cli;
mod east_west;
mod envoy;
mod extensions;
mod file_source;
mod gateway;
mod gateway_api;
mod gateway_api_status;
mod grpc;
mod helm;
mod istioctl;
mod kubernetes;
mod multicluster;
mod observability;
mod reliability;
mod security;
mod sidecar_capture;
mod stats;
mod tls_settings;
mod waypoint;
mod webhooks;

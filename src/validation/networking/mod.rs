//! Rules for networking.istio.io kinds, a file per kind (a VirtualService's HTTP routes in
//! `http`); `validation::check` dispatches to the entry point of each.

mod destination_rule;
mod envoy_filter;
mod gateway;
mod http;
mod service_entry;
mod sidecar;
mod virtual_service;

pub(super) use destination_rule::destination_rule;
pub(super) use envoy_filter::envoy_filter;
pub(super) use gateway::gateway;
pub(super) use service_entry::{service_entry, workload_entry, workload_group};
pub(super) use sidecar::sidecar;
pub(super) use virtual_service::virtual_service;

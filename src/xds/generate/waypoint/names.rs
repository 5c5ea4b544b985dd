//! The names a waypoint's internal listeners and clusters go by (istiod's), and the port it
//! takes HBONE on.

use crate::model::Service;

pub const CONNECT_TERMINATE: &str = "connect_terminate";

pub const MAIN_INTERNAL: &str = "main_internal";

pub const CONNECT_ORIGINATE: &str = "connect_originate";

/// The cluster of workload-addressed traffic: straight to `connect_originate`.
pub const ENCAP: &str = "encap";

/// The port waypoints and ztunnels take HBONE on.
pub const HBONE_PORT: u32 = 15008;

/// The subset part of a waypoint cluster for `port` of `svc`: istiod's `portToSubset`, the
/// port's protocol class (`tcp`, or `http` for HTTP and sniffed ports and ports it does not
/// know), then `/<subset>` when there is one.
pub fn vip_subset(svc: Option<&Service>, port: u32, subset: &str) -> String {
    let class = match svc.and_then(|s| s.port(port)) {
        Some(p) if !p.protocol.is_http() && p.protocol != crate::model::Protocol::Unsupported => {
            "tcp"
        }
        _ => "http",
    };
    if subset.is_empty() {
        class.to_string()
    } else {
        format!("{class}/{subset}")
    }
}

/// Envoy's original-destination metadata and filter-state namespace (`hbone`).
pub use crate::xds::generate::shared::hbone::ORIGINAL_DST_KEY;

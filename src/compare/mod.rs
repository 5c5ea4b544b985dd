//! One proxy's config from two control planes, compared: the engine behind `rudder shadow`
//! (istiod against Rudder, proxy by proxy), `rudder what-if` (Rudder before and after a change)
//! and the tests that hold a real Envoy's `/config_dump` against what Rudder sent it.
//!
//! Each side is read into a [`ProxyConfig`] (resources by type and name, as proto3 JSON with
//! defaults left out, whatever the source wrote them with), and [`diff::diff`] reports what
//! differs per resource and field path, ignoring what Envoy ignores: the order of resources, of
//! filter chains and virtual hosts (matched by name), of sets such as domains and server names.

pub mod allow;
pub mod config;
pub mod control_plane;
pub mod diff;
pub mod local;
pub mod report;

pub use config::ProxyConfig;
pub use diff::{Difference, diff};

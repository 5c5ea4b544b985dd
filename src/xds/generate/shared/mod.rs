//! Builders every proxy role shares: clusters (CDS) and their endpoints (EDS), routes (RDS), the
//! TLS a listener terminates or a cluster originates, the network filters, HBONE transport, and
//! secrets (SDS).

pub mod cluster;
pub mod endpoint;
pub mod hbone;
pub mod jwt_payload;
pub mod locality;
pub mod network;
pub mod route;
pub(in crate::xds::generate) mod route_match;
pub mod secret;
pub mod tls;
pub mod upstream_tls;
pub mod util;
